import { realpath } from "node:fs/promises";
import path from "node:path";
import type { RuntimeObservation } from "../runtime.ts";
import { withAgentClient } from "./agent-socket.ts";
import { errMsg, pathExists, readOwned } from "./files.ts";
import type { Host } from "./host.ts";
import { processMemory } from "./procfs.ts";

/**
 * Observation: what an instance is doing, read from its data directory,
 * postmaster.pid, /proc and one query over its socket. Reads only; takes no
 * turn in the instance's queue, so it answers even during a slow start.
 */

interface PidFile {
  pid: number;
  /** The postmaster's start time (epoch seconds), as it wrote it. */
  started: string;
  port?: number;
  socketDir?: string;
  status?: string;
}

/**
 * postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shmem key, status.
 * The server's user can rewrite it: with `socketDir` (the one the agent gave the server) a socket
 * directory it names otherwise is not believed (undefined), so the agent's superuser never connects
 * where a tenant points it (another server's socket).
 */
export async function readPidFile(dataDir: string, socketDir?: string): Promise<PidFile | undefined> {
  let text: string;
  try {
    // The server's user writes it: no link followed, no FIFO waited on.
    text = await readOwned(undefined, path.join(dataDir, "postmaster.pid"));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  const lines = text.split("\n");
  const port = Number(lines[3]);
  const named = lines[4]?.split(",")[0]?.trim() || undefined;
  return {
    pid: Number(lines[0]),
    started: lines[2]?.trim() ?? "",
    port: Number.isInteger(port) && port > 0 ? port : undefined,
    socketDir: socketDir === undefined || named === socketDir ? named : undefined,
    status: lines[7]?.trim() || undefined,
  };
}

/**
 * The server's WAL position as bytes from 0/0: a standby's last received (or
 * replayed, whichever is further: after its WAL receiver restarted), a
 * primary's current write position. Failover compares standbys by it.
 */
const WAL_POSITION = `SELECT (CASE WHEN pg_is_in_recovery()
    THEN GREATEST(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) ELSE pg_current_wal_lsn() END - '0/0'::pg_lsn)::text AS pos`;

/** The instance's state now. */
export async function observeInstance(host: Host, id: string): Promise<RuntimeObservation> {
  const dir = host.instanceDir(id);
  if (!(await pathExists(path.join(dir, "PG_VERSION")))) return { state: "absent" };
  const pf = await readPidFile(dir, host.serverSocketDir(id));
  if (!pf) return { state: "stopped" };
  let real: string;
  try {
    real = await realpath(dir);
  } catch {
    return { state: "absent" };
  }
  if (!host.isPostmasterIn(pf.pid, real)) {
    return {
      state: "crashed",
      ...(Number.isInteger(pf.pid) && pf.pid > 0 ? { pid: pf.pid } : {}),
      message:
        Number.isInteger(pf.pid) && pf.pid > 0 ? `stale postmaster.pid: postmaster ${pf.pid} is not running` : "unreadable postmaster.pid",
    };
  }
  const base = { pid: pf.pid, ...(pf.port ? { port: pf.port } : {}) };
  if (!pf.port || !pf.socketDir) return { state: "running", ...base, message: "postmaster is starting" };
  try {
    // One query answers both: it runs, and how far its WAL goes (a standby: received; a primary: written).
    const { rows } = await withAgentClient(pf.socketDir, pf.port, (c) => c.query<{ pos: string | null }>(WAL_POSITION), 2000);
    const pos = rows[0]?.pos;
    return { state: "running", ...base, ...(pos ? { walPosition: BigInt(pos) } : {}) };
  } catch (e) {
    return {
      state: "running",
      ...base,
      message: `postmaster alive but not accepting connections (${pf.status ?? "unknown status"}): ${errMsg(e)}`,
    };
  }
}

export interface InstanceResourceUsage {
  pids: number[];
  /** Sum of RSS; double-counts shared buffers touched by several processes. */
  rssBytes: number;
  /** Sum of PSS: shared pages split between the processes sharing them. */
  pssBytes: number;
}

/** Memory of the instance's processes (for metrics). */
export async function resourceUsage(host: Host, id: string): Promise<InstanceResourceUsage> {
  let real: string;
  try {
    real = await realpath(host.instanceDir(id));
  } catch {
    return { pids: [], rssBytes: 0, pssBytes: 0 };
  }
  const pids = host.serverPidsIn(real);
  let rssBytes = 0;
  let pssBytes = 0;
  for (const pid of pids) {
    const m = processMemory(pid);
    rssBytes += m.rssBytes;
    pssBytes += m.pssBytes;
  }
  return { pids, rssBytes, pssBytes };
}
