/**
 * Runs the fuzz against a fixture: generated requests over every operation of
 * the served document, with a raw-socket request of malformed HTTP every
 * RAW_EVERY-th, a few at a time; judges every answer; prints the counts and,
 * for each failure, a request that reproduces it.
 */
import http from "node:http";
import type { Fixture } from "./fixture.ts";
import { createGenerator, type FuzzRequest } from "./generate.ts";
import { operationsOf, publicCodes } from "./openapi.ts";
import { judge, type Observed, type Problem } from "./oracle.ts";
import { createRng } from "./prng.ts";
import { parseResponses, rawRequest, sendRaw, type RawRequest } from "./raw.ts";

export interface FuzzOptions {
  seed: number;
  requests: number;
  concurrency?: number;
  /** Only this index is sent (the ones before it are generated, not sent): replays one failure. */
  only?: number;
  /** Per request. */
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface Failure {
  index: number;
  request: string;
  problems: Problem[];
  /** The answer's status (0: none). */
  status: number;
  /** For grouping: the operation (or raw template) and the kind of problem. */
  group: string;
}

export interface FuzzReport {
  seed: number;
  sent: number;
  byStatus: Record<string, number>;
  raw: number;
  /** Requests the HTTP client itself refused to send (an invalid header value). */
  unsendable: number;
  operations: number;
  /** Statuses per operation of the document (and "off-document"). */
  byOperation: Record<string, Record<string, number>>;
  failures: Failure[];
  durationMs: number;
}

const RAW_EVERY = 30;

function printable(body: Buffer | undefined, max = 1500): string {
  if (body === undefined) return "(none)";
  const text = body.toString("utf8");
  const valid = Buffer.from(text, "utf8").equals(body);
  const shown = valid
    ? JSON.stringify(text.length > max ? text.slice(0, max) : text)
    : `base64:${body.subarray(0, max).toString("base64")}`;
  return `${body.length} bytes${text.length > max ? ` (first ${max} shown)` : ""}: ${shown}`;
}

/** A request as text someone can send again (the credential by name: tokens differ per run). */
export function describeRequest(req: FuzzRequest): string {
  const headers = { ...req.headers };
  if (headers.authorization !== undefined) headers.authorization = `<${req.credential}>`;
  return [
    `#${req.index} ${req.method} ${req.path.length > 300 ? `${req.path.slice(0, 300)}… (${req.path.length} chars)` : req.path}`,
    `    credential: ${req.credential}; odd: ${req.what.join("; ") || "nothing"}`,
    `    headers: ${JSON.stringify(headers).slice(0, 600)}`,
    `    body: ${printable(req.body)}`,
  ].join("\n");
}

function describeRaw(req: RawRequest): string {
  const bytes = Buffer.concat([req.bytes, req.later ?? Buffer.alloc(0)]);
  return `#${req.index} raw: ${req.template}\n    bytes: ${JSON.stringify(bytes.subarray(0, 600).toString("latin1"))}${bytes.length > 600 ? ` … (${bytes.length} bytes)` : ""}`;
}

function send(agent: http.Agent, url: URL, req: FuzzRequest, timeoutMs: number): Promise<Observed | { error: string }> {
  return new Promise((resolve) => {
    let r: http.ClientRequest;
    try {
      r = http.request({
        agent,
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.path,
        headers: { ...req.headers, ...(req.body ? { "content-length": String(req.body.length) } : {}) },
      });
    } catch (err) {
      resolve({ error: `unsendable: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` });
      return;
    }
    r.setTimeout(timeoutMs, () => r.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    r.on("error", (err) => resolve({ error: (err as NodeJS.ErrnoException).code ?? err.message }));
    r.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", (err) => resolve({ error: `answer cut: ${err.message}` }));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    r.end(req.body);
  });
}

export async function runFuzz(fixture: Fixture, opts: FuzzOptions): Promise<FuzzReport> {
  const log = opts.log ?? ((l: string) => process.stdout.write(`${l}\n`));
  const started = Date.now();
  const url = new URL(fixture.baseUrl);
  const ops = operationsOf(fixture.doc);
  const codes = publicCodes(fixture.doc);
  const gen = createGenerator(ops, fixture, createRng(opts.seed));
  const rawRng = createRng((opts.seed ^ 0x5eed5eed) >>> 0);
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.concurrency ?? 8 });
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const owner = fixture.valid[0]!.authorization!;
  const report: FuzzReport = {
    seed: opts.seed,
    sent: 0,
    byStatus: {},
    raw: 0,
    unsendable: 0,
    operations: ops.length,
    byOperation: {},
    failures: [],
    durationMs: 0,
  };
  const count = (status: number | string) => (report.byStatus[status] = (report.byStatus[status] ?? 0) + 1);
  const fail = (index: number, request: string, group: string, status: number, problems: Problem[]) => {
    report.failures.push({
      index,
      request,
      problems,
      status,
      group: `${group} — ${problems.map((p) => p.kind).join(", ")}${status ? ` (${status})` : ""}`,
    });
    if (report.failures.length <= 200) log(`FAIL ${request}\n    → ${problems.map((p) => `${p.kind}: ${p.detail}`).join("\n    → ")}`);
  };

  let nextIndex = 0;
  let rawOrdinal = 0;
  /** Takes the next index and generates its request now, so the PRNG is consumed in index order whatever the concurrency. */
  const take = (): { index: number; http?: FuzzRequest; raw?: RawRequest } | undefined => {
    if (nextIndex >= opts.requests) return undefined;
    const index = nextIndex++;
    if (index % RAW_EVERY === RAW_EVERY - 1) return { index, raw: rawRequest(rawRng, rawOrdinal++, index, owner) };
    return { index, http: gen.next(index) };
  };

  const worker = async () => {
    for (let job = take(); job; job = take()) {
      if (opts.only !== undefined && job.index !== opts.only) continue;
      report.sent++;
      if (job.raw) {
        report.raw++;
        const { data, error } = await sendRaw(Number(url.port), job.raw);
        const answers = parseResponses(data);
        if (answers.length === 0) {
          count("no answer");
          fail(job.index, describeRaw(job.raw), `raw: ${job.raw.template}`, 0, [
            {
              kind: "no answer",
              detail:
                error ??
                `closed after ${data.length} bytes that are no response: ${JSON.stringify(data.subarray(0, 100).toString("latin1"))}`,
            },
          ]);
          continue;
        }
        // Interim answers (100 Continue) carry no envelope; the final one follows.
        for (const answer of answers.filter((a) => a.status >= 200)) {
          count(answer.status);
          const problems = judge("GET", "/v1/raw", answer, codes);
          if (problems.length > 0) fail(job.index, describeRaw(job.raw), `raw: ${job.raw.template}`, answer.status, problems);
        }
        continue;
      }
      const req = job.http!;
      const res = await send(agent, url, req, timeoutMs);
      if ("error" in res) {
        if (res.error.startsWith("unsendable")) {
          report.unsendable++;
          continue;
        }
        count("no answer");
        fail(req.index, describeRequest(req), req.operation, 0, [{ kind: "no answer", detail: res.error }]);
        continue;
      }
      count(res.status);
      const perOp = report.byOperation[req.operation] ?? {};
      report.byOperation[req.operation] = perOp;
      perOp[res.status] = (perOp[res.status] ?? 0) + 1;
      const problems = judge(req.method, req.path, res, codes);
      if (req.unknownField && res.status >= 200 && res.status < 300) {
        problems.push({
          kind: "unknown body field accepted",
          detail: `${res.status}: a property the document does not declare was ignored, not refused (422)`,
        });
      }
      if (problems.length > 0) fail(req.index, describeRequest(req), req.operation, res.status, problems);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 8 }, worker));
  agent.destroy();
  report.durationMs = Date.now() - started;
  return report;
}

/** Statuses per operation, one line each: what the run reached. */
export function coverage(report: FuzzReport): string {
  return Object.entries(report.byOperation)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(
      ([op, statuses]) =>
        `  ${op.padEnd(48)} ${Object.entries(statuses)
          .map(([s, n]) => `${s}×${n}`)
          .join(" ")}`,
    )
    .join("\n");
}

/** The counts and the failures grouped by cause (operation, problem, status), each group with its first requests. */
export function summarize(report: FuzzReport): string {
  const lines = [
    `fuzz: seed ${report.seed} (FUZZ_SEED=${report.seed} repeats it), ${report.sent} requests (${report.raw} raw) over ${report.operations} operations in ${(report.durationMs / 1000).toFixed(1)} s`,
    `by status: ${Object.entries(report.byStatus)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([s, n]) => `${s}: ${n}`)
      .join(", ")}`,
  ];
  if (report.unsendable > 0) lines.push(`not sent (the HTTP client refused them): ${report.unsendable}`);
  const groups = new Map<string, Failure[]>();
  for (const f of report.failures) groups.set(f.group, [...(groups.get(f.group) ?? []), f]);
  lines.push(report.failures.length === 0 ? "failures: none" : `failures: ${report.failures.length} in ${groups.size} groups`);
  for (const [group, failures] of [...groups].sort((a, b) => b[1].length - a[1].length)) {
    lines.push(`\n  ${failures.length}× ${group}`);
    for (const f of failures.slice(0, 3)) {
      lines.push(f.request.replace(/^/gm, "    "));
      lines.push(`      → ${f.problems.map((p) => `${p.kind}: ${p.detail}`).join("\n      → ")}`);
    }
    if (failures.length > 3) {
      const more = failures
        .slice(3, 503)
        .map((f) => f.index)
        .join(", ");
      lines.push(
        `    … and ${failures.length - 3} more, indexes ${more}${failures.length > 503 ? ", …" : ""} (FUZZ_SEED=${report.seed} FUZZ_ONLY=<index> sends one again)`,
      );
    }
  }
  return lines.join("\n");
}
