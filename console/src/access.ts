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

/** Waits between reads of the role after one failed (a 503 or a timeout under load): read again until known. */
const RETRY_MS = [1_000, 2_000, 5_000, 10_000, 30_000];

/**
 * The signed-in member's role; undefined until known (the API still decides). Only an answer is kept for the
 * session: a failed read (a 503, a timeout) is forgotten and read again, so a viewer is not taken for an owner
 * for the rest of the session because one request failed.
 */
export function useMemberRole(): MemberRole | undefined {
  const session = useSession();
  const [role, setRole] = useState<MemberRole | undefined>(undefined);
  useEffect(() => {
    if (!session) return;
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = (attempt: number) => {
      if (cached?.token !== session.token) cached = { token: session.token, role: readRole(session.email) };
      const mine = cached;
      mine.role.then(
        (r) => live && setRole(r),
        () => {
          if (cached === mine) cached = undefined;
          if (live) timer = setTimeout(() => read(attempt + 1), RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]);
        },
      );
    };
    read(0);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [session?.token]);
  return role;
}

/** True inside a page the member may only look at: SubmitForm and the pages' buttons read it to disable changes. */
export const ReadOnly = createContext(false);

export const useReadOnly = (): boolean => useContext(ReadOnly);
