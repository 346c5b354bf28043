import { create } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { invalidArgument, notFound, Validator } from "@dbaas/kit";
import { LogEntrySchema, QueryStatSchema } from "@dbaas/proto/inside";
import type { InstanceLogEntry, InstanceQueryStat } from "@dbaas/proto/instance-admin";
import type { AppContext } from "../context.ts";
import { findOwned } from "../db/databases.ts";
import { controlUrlOf } from "../db/inside.ts";
import { adminAt, askAgent, runningInside } from "./agent-admin.ts";

/**
 * The server's log and query insights (docs/product.md, Inside the database). The log is read by the database's
 * agent from the server's jsonlog files, in any status in which the database has a host (a stopped or failed
 * database's log is what tells why); query statistics come from the running server's pg_stat_statements.
 */

/** Severities a filter names, least severe first (PostgreSQL's client order). */
export const LOG_SEVERITIES = ["DEBUG", "INFO", "LOG", "NOTICE", "WARNING", "ERROR", "FATAL", "PANIC"] as const;
export const LOG_LIMIT = { default: 100, maximum: 1000 } as const;
export const LOG_QUERY_MAX = 200;
export const QUERY_ORDERS = ["total_time", "mean_time", "calls"] as const;
export const QUERIES_LIMIT = { default: 20, maximum: 100 } as const;

const date = (t: Timestamp | undefined) => (t ? timestampDate(t) : undefined);

const toEntry = (e: InstanceLogEntry) =>
  create(LogEntrySchema, {
    ...(e.time && { time: e.time }),
    severity: e.severity,
    message: e.message,
    detail: e.detail,
    hint: e.hint,
    context: e.context,
    statement: e.statement,
    sqlState: e.sqlState,
    user: e.user,
    database: e.database,
    applicationName: e.applicationName,
    backendType: e.backendType,
    pid: e.pid,
  });

export async function listLogs(
  ctx: AppContext,
  req: {
    organizationId: string;
    databaseId: string;
    since?: Timestamp;
    until?: Timestamp;
    severity: string;
    q: string;
    limit: number;
    cursor: string;
  },
) {
  const v = new Validator();
  const severity = req.severity.toUpperCase();
  if (severity !== "" && !(LOG_SEVERITIES as readonly string[]).includes(severity))
    v.add("severity", `must be one of: ${LOG_SEVERITIES.join(", ")}`);
  const limit = req.limit === 0 ? LOG_LIMIT.default : req.limit;
  if (limit < 1 || limit > LOG_LIMIT.maximum) v.add("limit", `must be between 1 and ${LOG_LIMIT.maximum}`);
  if (req.q.length > LOG_QUERY_MAX) v.add("q", `must be at most ${LOG_QUERY_MAX} characters`);
  if ([...req.q].some((ch) => ch.charCodeAt(0) < 0x20)) v.add("q", "must not contain control characters");
  if (req.cursor.length > 200 || !/^[A-Za-z0-9_-]*$/.test(req.cursor)) v.add("cursor", "is not a cursor this API gave");
  const since = date(req.since);
  const until = date(req.until);
  if (since && until && since >= until) v.add("until", "must be after since");
  v.throwIfAny();

  const row = await findOwned(ctx.pool, req.organizationId, req.databaseId);
  if (!row) throw notFound("database");
  const admin = adminAt(ctx, await controlUrlOf(ctx.pool, row.agent_id), row.id);
  try {
    const res = await askAgent(ctx, row.id, () =>
      admin.readLogs({
        databaseId: row.id,
        ...(req.since && { since: req.since }),
        ...(req.until && { until: req.until }),
        minSeverity: severity,
        q: req.q,
        limit,
        cursor: req.cursor,
      }),
    );
    return { entries: res.entries.map(toEntry), nextCursor: res.nextCursor, prevCursor: res.prevCursor };
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.InvalidArgument && err.rawMessage.startsWith("cursor:"))
      throw invalidArgument([{ field: "cursor", message: "is not a cursor this API gave" }]);
    // Not on its host yet (still being provisioned there): no log so far.
    if (err instanceof ConnectError && err.code === Code.NotFound) return { entries: [], nextCursor: req.cursor, prevCursor: "" };
    throw err;
  }
}

const ratio = (s: InstanceQueryStat): number | undefined => {
  const total = s.sharedBlksHit + s.sharedBlksRead;
  return total === 0n ? undefined : Number(s.sharedBlksHit) / Number(total);
};

const toStat = (s: InstanceQueryStat) => {
  const r = ratio(s);
  return create(QueryStatSchema, {
    queryId: s.queryId,
    query: s.query,
    calls: s.calls,
    totalTimeMs: s.totalTimeMs,
    meanTimeMs: s.meanTimeMs,
    minTimeMs: s.minTimeMs,
    maxTimeMs: s.maxTimeMs,
    rows: s.rows,
    ...(r !== undefined && { cacheHitRatio: r }),
    user: s.user,
    database: s.database,
  });
};

const WHAT = "query statistics can be read";

export async function listQueries(ctx: AppContext, req: { organizationId: string; databaseId: string; orderBy: string; limit: number }) {
  const v = new Validator();
  const orderBy = req.orderBy === "" ? "total_time" : req.orderBy;
  v.oneOf("order_by", orderBy, QUERY_ORDERS);
  const limit = req.limit === 0 ? QUERIES_LIMIT.default : req.limit;
  if (limit < 1 || limit > QUERIES_LIMIT.maximum) v.add("limit", `must be between 1 and ${QUERIES_LIMIT.maximum}`);
  v.throwIfAny();
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  const res = await askAgent(ctx, row.id, () => admin.listQueryStats({ databaseId: row.id, orderBy, limit }));
  return { queries: res.stats.map(toStat), ...(res.statsReset && { statsReset: res.statsReset }) };
}

export async function resetQueries(ctx: AppContext, req: { organizationId: string; databaseId: string }) {
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, "query statistics can be reset");
  await askAgent(ctx, row.id, () => admin.resetQueryStats({ databaseId: row.id }));
  ctx.log.info("query statistics reset", { database_id: row.id });
}
