import type { InstanceAccess } from "./instance-access.ts";
import { type LogEntry, readLog } from "./server-log/reader.ts";

/**
 * A replica (or standby) that can never follow its primary (docs/decisions.md, "A replica past the new primary's
 * timeline is re-seeded"): after a failover the promoted standby's timeline forks off the old one where the standby's
 * WAL ended; a replica that had already replayed WAL the old primary wrote after that point cannot switch to the new
 * timeline, and without pg_rewind only a new copy of the data helps. PostgreSQL says so in the server's log, and
 * says it again at every retry (each second, wal_retrieve_retry_interval), so the newest entries are enough:
 *
 * - the startup process, when its WAL receiver brought the new timeline's history: "new timeline N forked off
 *   current database system timeline M before current recovery point X" (LOG);
 * - a start with that history in pg_wal: "requested timeline N is not a child of this server's history" (FATAL).
 *
 * Only what the server wrote since its latest start counts ("starting PostgreSQL …"): the log of a server that
 * followed after a restart says nothing about it now.
 */
const DIVERGED = [
  /^new timeline \d+ forked off current database system timeline \d+ before current recovery point /,
  /^requested timeline \d+ is not a child of this server's history/,
];
const STARTED = /^starting PostgreSQL /;

/** How much of the log's end is read each time (the messages repeat every second; a start is written just before). */
const SCAN_BYTES = 256 * 1024;

/** What the entries (oldest first) say since the server's latest start about a timeline it cannot follow, if anything. */
export function divergenceIn(entries: readonly Pick<LogEntry, "message" | "detail">[]): string | undefined {
  let from = 0;
  for (let i = entries.length - 1; i >= 0; i--) {
    if (STARTED.test(entries[i]!.message)) {
      from = i + 1;
      break;
    }
  }
  for (let i = entries.length - 1; i >= from; i--) {
    const e = entries[i]!;
    if (DIVERGED.some((re) => re.test(e.message))) return e.detail ? `${e.message} (${e.detail})` : e.message;
  }
  return undefined;
}

/** What the server log in `dir` says since the server's latest start about a timeline it cannot follow, if anything. */
export async function divergenceInLog(dir: string, uid?: number): Promise<string | undefined> {
  const page = await readLog(dir, { limit: 2000, maxScanBytes: SCAN_BYTES, ...(uid !== undefined ? { uid } : {}) });
  return divergenceIn(page.entries);
}

/** Whether replica `id`'s server logged, since its latest start, that it cannot follow its primary's timeline (why). */
export async function timelineDivergence(access: InstanceAccess, id: string): Promise<string | undefined> {
  const log = await access.serverLog(id);
  return log ? divergenceInLog(log.dir, log.uid) : undefined;
}
