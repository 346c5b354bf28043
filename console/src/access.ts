import { createContext } from "preact";
import { useContext, useEffect, useState } from "preact/hooks";
import { client, useSession } from "./session.ts";

/**
 * What the signed-in member may change. The API is the judge (a viewer's change is a 403); the console
 * only says so before the click: a viewer's changing controls are disabled, with a note. The role is
 * read once per session (the members list, which every role may read), not on every page.
 */
export type MemberRole = "owner" | "admin" | "developer" | "viewer";

/** Roles without databases:write (docs/product.md, Roles and permissions): they see a database, change nothing. */
export const canChangeDatabases = (role: MemberRole | undefined): boolean => role !== "viewer";

let cached: { token: string; role: Promise<MemberRole | undefined> } | undefined;

async function readRole(email: string): Promise<MemberRole | undefined> {
  for await (const m of client.organization.listMembers({ per_page: 100 })) {
    if (m.user.email.toLowerCase() === email.toLowerCase()) return m.role as MemberRole;
  }
  return undefined;
}

/** The signed-in member's role; undefined until known (or when it cannot be read: the API still decides). */
export function useMemberRole(): MemberRole | undefined {
  const session = useSession();
  const [role, setRole] = useState<MemberRole | undefined>(undefined);
  useEffect(() => {
    if (!session) return;
    if (cached?.token !== session.token) {
      cached = { token: session.token, role: readRole(session.email).catch(() => undefined) };
    }
    let live = true;
    void cached.role.then((r) => live && setRole(r));
    return () => {
      live = false;
    };
  }, [session?.token]);
  return role;
}

/** True inside a page the member may only look at: SubmitForm and the pages' buttons read it to disable changes. */
export const ReadOnly = createContext(false);

export const useReadOnly = (): boolean => useContext(ReadOnly);
