import { Code, ConnectError } from "@connectrpc/connect";
import { INSTANCE_ID_RE, type InstanceAccess } from "../instance-access.ts";
import { decodeCursor, encodeCursor, isSeverity, type LogEntry, readLog } from "../server-log/reader.ts";

/**
 * The server's log for the databases service (docs/product.md, Inside the database): a page read from the
 * instance's jsonlog files, running or not (server-log/reader.ts: bounded reads, secrets masked).
 */

export const MAX_LOG_LIMIT = 1000;

export interface LogQuery {
  since?: Date;
  until?: Date;
  minSeverity: string;
  q: string;
  limit: number;
  cursor: string;
}

export interface LogPageOut {
  entries: LogEntry[];
  nextCursor: string;
  prevCursor: string;
}

export async function readLogs(access: InstanceAccess, id: string, o: LogQuery): Promise<LogPageOut> {
  if (!INSTANCE_ID_RE.test(id)) throw new ConnectError(`invalid database id ${JSON.stringify(id)}`, Code.InvalidArgument);
  if (o.minSeverity !== "" && !isSeverity(o.minSeverity))
    throw new ConnectError(`min_severity ${JSON.stringify(o.minSeverity)} is not a severity`, Code.InvalidArgument);
  if (o.limit < 1 || o.limit > MAX_LOG_LIMIT) throw new ConnectError(`limit must be 1 to ${MAX_LOG_LIMIT}`, Code.InvalidArgument);
  const cursor = o.cursor === "" ? undefined : decodeCursor(o.cursor);
  if (o.cursor !== "" && !cursor) throw new ConnectError("cursor: not a cursor of this log", Code.InvalidArgument);
  const log = await access.serverLog(id);
  if (!log) throw new ConnectError(`no instance ${id} on this host`, Code.NotFound);
  const page = await readLog(log.dir, {
    limit: o.limit,
    uid: log.uid,
    ...(cursor && { cursor }),
    ...(o.since && { since: o.since }),
    ...(o.until && { until: o.until }),
    ...(o.minSeverity !== "" && { minSeverity: o.minSeverity }),
    ...(o.q !== "" && { q: o.q }),
  });
  return { entries: page.entries, nextCursor: encodeCursor(page.next), prevCursor: page.prev ? encodeCursor(page.prev) : "" };
}
