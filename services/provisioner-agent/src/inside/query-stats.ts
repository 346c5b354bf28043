import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import type { InstanceAccess } from "../instance-access.ts";
import { redactFields } from "../server-log/redact.ts";
import { withAdminSession } from "./session.ts";

/**
 * Query insights (docs/product.md, Inside the database): pg_stat_statements, preloaded on every server, read as
 * the agent's superuser in `postgres` (where the agent creates the extension when it is missing: the view exists
 * only where it is created, and there it shows every database's statements). Only the customer's roles' statements
 * (not the agent's, not replication's), in PostgreSQL's normalized text; utility statements are not tracked
 * (server-config.ts), and a text that still mentions a secret has its literals masked.
 */

// Over the numeric columns (calls_n, not the text `calls` the rows carry: text sorts "9" above "10", and
// `total_ms / calls` on text was an error — found by the fuzz run).
export const ORDER_BY = { total_time: "total_ms", mean_time: "total_ms / calls_n", calls: "calls_n" } as const;
export type OrderBy = keyof typeof ORDER_BY;
export const isOrderBy = (s: string): s is OrderBy => Object.hasOwn(ORDER_BY, s);
export const MAX_QUERIES_LIMIT = 100;

export interface QueryStat {
  queryId: string;
  query: string;
  calls: bigint;
  totalTimeMs: number;
  meanTimeMs: number;
  minTimeMs: number;
  maxTimeMs: number;
  rows: bigint;
  sharedBlksHit: bigint;
  sharedBlksRead: bigint;
  user: string;
  database: string;
}

const NOT_PRELOADED = () =>
  new ConnectError(
    "query statistics need pg_stat_statements in shared_preload_libraries (the default): set it back through the configuration and restart the database",
    Code.FailedPrecondition,
  );

/** The extension in `postgres`, created when missing (two callers at once: one wins, the other finds it). */
async function ensureExtension(c: pg.Client): Promise<void> {
  const { rowCount } = await c.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'");
  if (rowCount) return;
  await c.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").catch((e: { code?: string }) => {
    if (e.code !== "23505" && e.code !== "42710") throw e;
  });
}

async function preloaded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if ((e as { code?: string }).code === "55000") throw NOT_PRELOADED();
    throw e;
  }
}

export async function listQueryStats(
  access: InstanceAccess,
  id: string,
  o: { orderBy: string; limit: number },
): Promise<{ stats: QueryStat[]; statsReset?: Date }> {
  const orderBy = o.orderBy === "" ? "total_time" : o.orderBy;
  if (!isOrderBy(orderBy)) throw new ConnectError(`order_by must be one of ${Object.keys(ORDER_BY).join(", ")}`, Code.InvalidArgument);
  if (o.limit < 1 || o.limit > MAX_QUERIES_LIMIT) throw new ConnectError(`limit must be 1 to ${MAX_QUERIES_LIMIT}`, Code.InvalidArgument);
  return withAdminSession(access, id, (c) =>
    preloaded(async () => {
      await ensureExtension(c);
      const { rows } = await c.query<{
        query_id: string;
        query: string;
        calls: string;
        total_ms: number;
        min_ms: number;
        max_ms: number;
        rows: string;
        hit: string;
        read: string;
        usr: string;
        db: string | null;
      }>(
        `SELECT * FROM (
           SELECT s.queryid::text AS query_id, s.query, s.calls::text AS calls, s.calls AS calls_n,
                  (s.total_exec_time + s.total_plan_time)::float8 AS total_ms,
                  s.min_exec_time::float8 AS min_ms, s.max_exec_time::float8 AS max_ms, s.rows::text AS rows,
                  s.shared_blks_hit::text AS hit, s.shared_blks_read::text AS read, r.rolname AS usr, d.datname AS db
           FROM pg_stat_statements s
           JOIN pg_roles r ON r.oid = s.userid
           LEFT JOIN pg_database d ON d.oid = s.dbid
           WHERE NOT r.rolsuper AND NOT r.rolreplication AND NOT r.rolbypassrls AND r.rolname !~ '^pg_' AND s.calls > 0
         ) q ORDER BY ${ORDER_BY[orderBy]} DESC, query_id LIMIT $1`,
        [o.limit],
      );
      const reset = await c.query<{ t: Date | null }>("SELECT stats_reset AS t FROM pg_stat_statements_info");
      return {
        stats: rows.map((r) => {
          const calls = BigInt(r.calls);
          return {
            queryId: r.query_id ?? "",
            query: redactFields({ q: r.query ?? "" }).q,
            calls,
            totalTimeMs: r.total_ms,
            meanTimeMs: calls > 0n ? r.total_ms / Number(calls) : 0,
            minTimeMs: r.min_ms,
            maxTimeMs: r.max_ms,
            rows: BigInt(r.rows),
            sharedBlksHit: BigInt(r.hit),
            sharedBlksRead: BigInt(r.read),
            user: r.usr,
            database: r.db ?? "",
          };
        }),
        ...(reset.rows[0]?.t && { statsReset: reset.rows[0].t }),
      };
    }),
  );
}

export async function resetQueryStats(access: InstanceAccess, id: string): Promise<void> {
  await withAdminSession(access, id, (c) =>
    preloaded(async () => {
      await ensureExtension(c);
      await c.query("SELECT pg_stat_statements_reset()");
    }),
  );
}
