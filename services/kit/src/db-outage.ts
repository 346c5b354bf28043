import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type pg from "pg";
import { dependencyUnavailable } from "./errors.ts";
import type { Logger } from "./logger.ts";

/** Socket errors of a connection that could not be made or was cut. */
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"]);
/** SQLSTATEs of a server going away or not taking connections: shutdown, crash, starting up, too many connections. */
const SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300"]);
/**
 * SQLSTATEs of a transaction PostgreSQL rolled back because another one met it at the same moment: a deadlock,
 * a serialization failure, a lock NOWAIT could not take. Nothing of that transaction took effect, and the same
 * request sent again normally succeeds.
 */
const CONFLICT_SQLSTATES = new Set(["40P01", "40001", "55P03"]);
/** node-postgres says these in words only. */
const PG_MESSAGES = [
  "Connection terminated",
  "connection timeout",
  "timeout exceeded when trying to connect",
  "Client has encountered a connection error and is not queryable",
  "Cannot use a pool after calling end on the pool",
];

/**
 * Whether `err` (or its cause) says the service could not reach its PostgreSQL
 * — refused, cut, shut down, starting up — rather than that PostgreSQL
 * refused the statement. The statement did not take effect: a connection lost
 * before COMMIT rolls its transaction back.
 */
export function isDatabaseUnreachable(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof ConnectError) return false;
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === "string" && (SOCKET_CODES.has(code) || SQLSTATES.has(code) || code.startsWith("08"))) return true;
    if (typeof message === "string" && PG_MESSAGES.some((m) => message.includes(m))) return true;
    if (e instanceof AggregateError && e.errors.some(isDatabaseUnreachable)) return true;
  }
  return false;
}

/** Whether `err` (or its cause) is PostgreSQL rolling back a transaction that conflicted with another (CONFLICT_SQLSTATES). */
export function isTransactionConflict(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof ConnectError) return false;
    const { code } = e as { code?: unknown };
    if (typeof code === "string" && CONFLICT_SQLSTATES.has(code)) return true;
  }
  return false;
}

/**
 * Turns "cannot reach PostgreSQL" thrown by a unary handler into
 * UNAVAILABLE (the gateway's 503, "try again shortly") instead of the
 * INTERNAL every unexpected error becomes (a 500 that blames the request).
 * One warning per outage, not one per call. A transaction PostgreSQL rolled
 * back for a conflict with another (a deadlock between two requests) is a 503
 * "try again" too (the handler ran: not UNAVAILABLE, which would let a client
 * resend it unasked), logged each time with the procedure and the SQLSTATE.
 */
export function databaseOutage(service: string, log: Logger): Interceptor {
  let lastWarning = 0;
  return (next) => async (req) => {
    if (req.stream) return await next(req);
    try {
      return await next(req);
    } catch (err) {
      if (isTransactionConflict(err)) {
        log.warn("a transaction conflicted with another and was rolled back; answering 503", { procedure: req.method.name, error: err });
        throw dependencyUnavailable("the request met another change made at the same moment and was not carried out; try again");
      }
      if (!isDatabaseUnreachable(err)) throw err;
      if (Date.now() - lastWarning > 10_000) {
        lastWarning = Date.now();
        log.warn("database unreachable; answering UNAVAILABLE", { procedure: req.method.name, error: err });
      }
      throw new ConnectError(`${service} cannot reach its database; try again shortly`, Code.Unavailable, undefined, undefined, err);
    }
  };
}

/**
 * The database part of a service's /healthz: `{ database: "ok" }`, or an
 * error (the server answers 503 "unavailable") when a query does not come
 * back within `timeoutMs` — a stopped or hung server must not hang the probe.
 */
export async function databaseHealth(pool: pg.Pool, timeoutMs = 2_000): Promise<{ database: "ok" }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`database did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([pool.query("SELECT 1"), late]);
    return { database: "ok" };
  } catch (err) {
    throw new Error(`database unreachable: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}
