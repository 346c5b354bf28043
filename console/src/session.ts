import { DbaasClient } from "@dbaas/client";
import { useSyncExternalStore } from "preact/compat";

/**
 * The signed-in session: the client every page calls the API through, and
 * the login token. The token lives in this tab's memory and sessionStorage
 * (a reload keeps the tab signed in, closing it signs out) — never in a URL
 * or localStorage.
 */
const KEY = "dbaas.session";

export interface Session {
  token: string;
  email: string;
  expiresAt: string;
}

function stored(): Session | undefined {
  try {
    const raw = sessionStorage.getItem(KEY);
    return raw ? (JSON.parse(raw) as Session) : undefined;
  } catch {
    return undefined;
  }
}

let current: Session | undefined = stored();
const listeners = new Set<() => void>();

/** One retry at most: a person is waiting, and polling pages read again on their own. */
export const client = new DbaasClient({ baseUrl: location.origin, token: current?.token, maxRetries: 1, maxRetryWaitMs: 5_000 });

export function signIn(session: Session): void {
  current = session;
  sessionStorage.setItem(KEY, JSON.stringify(session));
  client.setToken(session.token);
  for (const l of listeners) l();
}

export function signOut(): void {
  current = undefined;
  sessionStorage.removeItem(KEY);
  client.setToken(undefined);
  for (const l of listeners) l();
}

export function useSession(): Session | undefined {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => current,
  );
}
