import type pg from "pg";
import { ADMIN_ROLE, DEFAULT_DATABASE, withAgentSession } from "../instance-access.ts";

/** Superuser the agent uses over the unix socket; never reachable over TCP. */
export const AGENT_SUPERUSER = "dbaas_agent";
export { ADMIN_ROLE, DEFAULT_DATABASE };

/** One short session as the agent's superuser over an instance's unix socket. */
export function withAgentClient<T>(sock: string, port: number, fn: (c: pg.Client) => Promise<T>, timeoutMs = 5000): Promise<T> {
  return withAgentSession({ host: sock, port, user: AGENT_SUPERUSER }, fn, timeoutMs);
}
