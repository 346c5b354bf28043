import type pg from "pg";
import { type AdminSessionOptions, type AgentConnection, ServerNotRunning } from "../instance-access.ts";
import { AGENT_SUPERUSER } from "./agent-socket.ts";
import type { Host } from "./host.ts";
import { readPidFile } from "./observe.ts";

/** The agent's session on `id`'s server as its postmaster.pid names it now (its socket, port and generation); undefined when none runs. */
export async function agentConnectionOf(host: Host, id: string): Promise<AgentConnection | undefined> {
  const pf = await readPidFile(host.instanceDir(id), host.serverSocketDir(id));
  return pf?.port && pf.socketDir
    ? { host: pf.socketDir, port: pf.port, user: AGENT_SUPERUSER, generation: `${pf.pid}@${pf.started}` }
    : undefined;
}

/** `fn` in one of the agent's kept sessions (host.adminSessions) on `id`'s running server; ServerNotRunning when none runs. */
export async function adminSession<T>(host: Host, id: string, fn: (c: pg.Client) => Promise<T>, opts?: AdminSessionOptions): Promise<T> {
  const conn = await agentConnectionOf(host, id);
  if (!conn) throw new ServerNotRunning(id);
  return host.adminSessions.run(id, conn, fn, opts);
}
