import type { InstanceAccess } from "./instance-access.ts";
import { type LogEntry, readLog } from "./server-log/reader.ts";

/**
 * A replica (or standby) that can never follow its primary again (docs/decisions.md, "A replica that cannot follow
 * the new primary is re-seeded"). After a failover, two ways, both seen on the three-host stack:
 *
 * - the promoted standby's timeline forks off the old one where the standby's WAL ended; a replica that had already
 *   replayed WAL the old primary wrote after that point cannot switch to the new timeline (no pg_rewind in the server
 *   binaries). The startup process says so when its WAL receiver brought the new timeline's history: "new timeline N
 *   forked off current database system timeline M before current recovery point X" (LOG), and a start with that
 *   history in pg_wal: "requested timeline N is not a child of this server's history" (FATAL);
 * - the replica could follow, but the new primary no longer has the WAL it needs (its slot there is made only once
 *   the promoted server runs, after its checkpoints removed the older segments; replicas restore nothing from the
 *   archive): its WAL receiver fails with "requested WAL segment S has already been removed" from the primary.
 *
 * Either is said again at every retry (each second, wal_retrieve_retry_interval), so the newest entries are enough.
 * Only what the server wrote since its latest start counts ("starting PostgreSQL …"): the log of a server that
 * followed after a restart says nothing about it now.
 */
const CANNOT_FOLLOW = [
  /^new timeline \d+ forked off current database system timeline \d+ before current recovery point /,
  /^requested timeline \d+ is not a child of this server's history/,
  /requested WAL segment [0-9A-F]+ has already been removed/,
];
const STARTED = /^starting PostgreSQL /;

/** How much of the log's end is read each time (the messages repeat every second; a start is written just before). */
const SCAN_BYTES = 256 * 1024;

/** What the entries (oldest first) say since the server's latest start about why it cannot follow its primary, if anything. */
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
    if (CANNOT_FOLLOW.some((re) => re.test(e.message))) return e.detail ? `${e.message} (${e.detail})` : e.message;
  }
  return undefined;
}

/** What the server log in `dir` says since the server's latest start about why it cannot follow its primary, if anything. */
export async function divergenceInLog(dir: string, uid?: number): Promise<string | undefined> {
  const page = await readLog(dir, { limit: 2000, maxScanBytes: SCAN_BYTES, ...(uid !== undefined ? { uid } : {}) });
  return divergenceIn(page.entries);
}

/** Whether replica `id`'s server logged, since its latest start, that it cannot follow its primary (why). */
export async function timelineDivergence(access: InstanceAccess, id: string): Promise<string | undefined> {
  const log = await access.serverLog(id);
  return log ? divergenceInLog(log.dir, log.uid) : undefined;
}
