import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import type pg from "pg";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry };

/**
 * One per process, made in its main and passed down: Node's default process
 * metrics (CPU, memory, event loop lag, GC, handles) plus whatever the process
 * registers on it. Served as Prometheus text exposition at GET /metrics
 * (`startServer({ metrics })`, the gateway's app).
 */
export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Internal calls are sub-millisecond; the top buckets catch the slow ones (a backup, a 10 s deadline). */
const RPC_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * `rpc_requests_total{service,method,code}` and `rpc_duration_seconds{service,method}`
 * for every Connect call the server answers, on either of startServer's paths
 * (unary-server.ts and connect-node run the same interceptors). `code` is the
 * Connect code's name (`ok`, `not_found`, …). A streaming call is counted when
 * its stream ends, `canceled` when the caller leaves first.
 */
export function rpcMetricsInterceptor(registry: Registry): Interceptor {
  const requests = new Counter({
    name: "rpc_requests_total",
    help: "Connect calls answered, by service, method and outcome code",
    labelNames: ["service", "method", "code"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "rpc_duration_seconds",
    help: "Time from a call's arrival at the interceptors to its answer (a stream: to its end)",
    labelNames: ["service", "method"] as const,
    buckets: RPC_BUCKETS,
    registers: [registry],
  });
  return (next) => async (req) => {
    const started = performance.now();
    const labels = { service: req.service.typeName, method: req.method.name };
    const done = (code: string) => {
      requests.inc({ ...labels, code });
      duration.observe(labels, (performance.now() - started) / 1000);
    };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (err) {
      done(codeName(err));
      throw err;
    }
    if (!res.stream) {
      done("ok");
      return res;
    }
    return { ...res, message: measured(res.message, done) };
  };
}

async function* measured<T>(messages: AsyncIterable<T>, done: (code: string) => void): AsyncIterable<T> {
  let code = codeToString(Code.Canceled);
  try {
    yield* messages;
    code = "ok";
  } catch (err) {
    code = codeName(err);
    throw err;
  } finally {
    done(code);
  }
}

function codeName(err: unknown): string {
  return codeToString(ConnectError.from(err).code);
}

/** A service's outbox: its table and the condition of a row not yet delivered. */
export interface OutboxTable {
  table: string;
  /** SQL condition of an undelivered row, e.g. `delivered_at IS NULL`. */
  pending: string;
  /** Column of the row's creation time; default `created_at`. */
  createdAt?: string;
}

/**
 * `outbox_depth` (rows not yet delivered) and `outbox_oldest_age_seconds` (0
 * when none), read with one query when scraped (the two gauges share it).
 * `table` and `pending` are the caller's constants, never input. While the
 * query fails (PostgreSQL down) both read NaN and the rest of the scrape still answers.
 */
export function outboxMetrics(registry: Registry, pool: pg.Pool, outbox: OutboxTable): void {
  const sql =
    `SELECT count(*)::float8 AS depth, COALESCE(EXTRACT(EPOCH FROM now() - min(${outbox.createdAt ?? "created_at"})), 0)::float8 AS age ` +
    `FROM ${outbox.table} WHERE ${outbox.pending}`;
  let reading: Promise<{ depth: number; age: number }> | undefined;
  const read = () =>
    (reading ??= pool
      .query<{ depth: number; age: number }>(sql)
      .then((r) => r.rows[0]!)
      .catch(() => ({ depth: Number.NaN, age: Number.NaN }))
      .finally(() => (reading = undefined)));
  new Gauge({
    name: "outbox_depth",
    help: "Outbox rows not yet delivered",
    registers: [registry],
    async collect() {
      this.set((await read()).depth);
    },
  });
  new Gauge({
    name: "outbox_oldest_age_seconds",
    help: "Age of the oldest undelivered outbox row (0 when there is none)",
    registers: [registry],
    async collect() {
      this.set((await read()).age);
    },
  });
}

/** Answers a scrape: the registry's exposition with its content type (500 if a collector failed). */
export function answerMetrics(
  registry: Registry,
  res: { writeHead(status: number, headers: Record<string, string>): unknown; end(body: string): unknown },
): void {
  registry.metrics().then(
    (body) => {
      res.writeHead(200, { "content-type": registry.contentType });
      res.end(body);
    },
    (err: unknown) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(`metrics failed: ${(err as Error).message}\n`);
    },
  );
}
