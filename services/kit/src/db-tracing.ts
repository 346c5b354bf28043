import diagnostics from "node:diagnostics_channel";
import { type Attributes, context, type Span, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import pg from "pg";

/*
 * Spans of our own for PostgreSQL and Redis calls. OpenTelemetry's pg and
 * redis instrumentations patch `require`, which sees neither our ESM imports
 * nor modules loaded before the SDK starts (every service imports pg through
 * the kit before its main runs `startTelemetry`). Instead: pg's client is
 * wrapped here, and node-redis (≥ 5.12) publishes each command on its own
 * diagnostics channel, which is subscribed to here.
 *
 * Only calls made within a trace are spans: the services' background loops
 * (outbox relay, change feed, watch snapshots, …) would otherwise each start a
 * trace of their own several times a second. Statements carry no parameter
 * values (they may be secrets): pg's text has placeholders and its quoted
 * literals are blanked; a Redis span has the command's name only (a script's
 * arguments may hold a stored response).
 */

const tracer = () => trace.getTracer("dbaas-db");

/** A statement as a span shows it: quoted literals blanked, at most 2,000 characters. */
export function sanitizeStatement(text: string): string {
  const blanked = text.replace(/'(?:[^']|'')*'/g, "'?'");
  return blanked.length > 2000 ? `${blanked.slice(0, 2000)}…` : blanked;
}

function operationOf(text: string): string {
  return /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase() ?? "QUERY";
}

function endWith(span: Span, err: unknown): void {
  if (err) span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
  span.end();
}

type Callback = (err: Error | null, res?: unknown) => void;

/** Makes every query of this process's pg clients made within a trace a CLIENT span. Call once. */
function tracePostgres(): void {
  const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
  const traced = function (this: pg.Client, ...args: unknown[]): unknown {
    const parent = context.active();
    const config = args[0] as string | { text?: string; submit?: unknown } | null | undefined;
    // A submittable (a cursor, a stream) reports through its own events: left as it is.
    if (!trace.getSpan(parent) || config == null || (typeof config === "object" && typeof config.submit === "function")) {
      return query.apply(this, args);
    }
    const text = typeof config === "string" ? config : (config.text ?? "");
    const operation = operationOf(text);
    const attributes: Attributes = {
      "db.system": "postgresql",
      "db.operation": operation,
      "db.statement": sanitizeStatement(text),
      "db.name": this.database ?? "",
      "server.address": this.host ?? "",
    };
    if (this.port) attributes["server.port"] = this.port;
    const span = tracer().startSpan(`${operation} ${this.database ?? ""}`.trim(), { kind: SpanKind.CLIENT, attributes }, parent);
    const at = typeof args[2] === "function" ? 2 : typeof args[1] === "function" ? 1 : -1;
    if (at >= 0) {
      const callback = args[at] as Callback;
      args[at] = (err: Error | null, res?: unknown) => {
        endWith(span, err);
        callback(err, res);
      };
      return query.apply(this, args);
    }
    try {
      return (query.apply(this, args) as Promise<unknown>).then(
        (res) => {
          span.end();
          return res;
        },
        (err: unknown) => {
          endWith(span, err);
          throw err;
        },
      );
    } catch (err) {
      endWith(span, err);
      throw err;
    }
  };
  pg.Client.prototype.query = traced as typeof pg.Client.prototype.query;

  // pool.query waits for a client with a callback that a release runs: in the releasing
  // request's context unless bound to the caller's, which would put the query in another trace.
  const connect = pg.Pool.prototype.connect as (this: pg.Pool, cb?: unknown) => unknown;
  pg.Pool.prototype.connect = function (this: pg.Pool, cb?: unknown) {
    return connect.call(this, typeof cb === "function" ? context.bind(context.active(), cb) : cb);
  } as typeof pg.Pool.prototype.connect;
}

/** What node-redis publishes on its `node-redis:command` tracing channel (the part used here). */
interface RedisCommand {
  command: string;
  database: number;
  serverAddress: string;
  serverPort: number | undefined;
  error?: unknown;
}

/** Makes every node-redis command issued within a trace a CLIENT span. Call once. */
function traceRedis(): void {
  const spans = new WeakMap<object, Span>();
  diagnostics.tracingChannel<unknown, RedisCommand>("node-redis:command").subscribe({
    start(cmd) {
      const parent = context.active();
      if (!trace.getSpan(parent)) return;
      const attributes: Attributes = {
        "db.system": "redis",
        "db.operation": cmd.command,
        "db.statement": cmd.command,
        "db.redis.database_index": cmd.database,
        "server.address": cmd.serverAddress,
      };
      if (cmd.serverPort) attributes["server.port"] = cmd.serverPort;
      spans.set(cmd, tracer().startSpan(cmd.command, { kind: SpanKind.CLIENT, attributes }, parent));
    },
    // Thrown before a promise existed: there will be no asyncEnd.
    end(cmd) {
      const span = spans.get(cmd);
      if (span && "error" in cmd) {
        spans.delete(cmd);
        endWith(span, cmd.error);
      }
    },
    asyncStart() {},
    asyncEnd(cmd) {
      const span = spans.get(cmd);
      if (!span) return;
      spans.delete(cmd);
      endWith(span, cmd.error);
    },
    error() {},
  });
}

let installed = false;

/** Installs the PostgreSQL and Redis spans (once per process; `startTelemetry` does it). */
export function traceDatabaseCalls(): void {
  if (installed) return;
  installed = true;
  tracePostgres();
  traceRedis();
}
