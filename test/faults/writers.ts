import { randomUUID } from "node:crypto";

/**
 * The fault suite's clients: writers that create, rename, stop and start
 * databases through the public API as a careful client would — every write
 * retried until the API acknowledges it (same Idempotency-Key for POSTs), a
 * 409 resolved by reading what is there — and a ledger of what was
 * acknowledged, checked at the end against what the API then shows.
 */
export interface Answer {
  /** 0: no HTTP answer (connection refused or reset, timeout). */
  status: number;
  body: any;
  retryAfter?: string;
}

export interface Api {
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer>;
}

export function createApiClient(baseUrl: string, token: string): Api {
  return {
    async call(method, path, body, headers = {}) {
      try {
        const res = await fetch(baseUrl + path, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        let parsed: any;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = text;
        }
        return { status: res.status, body: parsed, retryAfter: res.headers.get("retry-after") ?? undefined };
      } catch {
        return { status: 0, body: undefined };
      }
    },
  };
}

/** What the writers were told, per database: the state the API must show at the end. */
export interface Expected {
  name: string;
  desired: "running" | "stopped";
}

export class Ledger {
  /** 2xx answers to writes. */
  acknowledged = 0;
  /** Writes whose 2xx never came but whose effect was found by reading (a retry met its own earlier success). */
  resolvedByReading = 0;
  readonly expected = new Map<string, Expected>();
  /** Answers a correct system never gives under faults: 5xx other than 503/504, unexpected 4xx. */
  readonly anomalies: string[] = [];
  /** Retries answered 409 "still in progress": the key's claim held by a gateway that died mid-request. */
  claimWaits = 0;
  /** Longest time one write took until it was settled (retries included), ms. */
  slowestWriteMs = 0;
  slowestWrite = "";
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RETRYABLE = new Set([0, 429, 502, 503, 504]);
/** A write not settled after this long is given up (and shows in the final check). */
const WRITE_DEADLINE_MS = 120_000;

type Outcome = "acked" | "resolved" | "failed";

/**
 * Sends one write until it is settled: acknowledged (2xx), or a 409 whose
 * `resolve` finds the write already in effect. Transient answers (no answer,
 * 503, 504, 429, and the idempotency 409 "still in progress") are retried
 * with the same Idempotency-Key.
 */
async function settle(
  ledger: Ledger,
  what: string,
  send: (key: string) => Promise<Answer>,
  resolve: () => Promise<boolean>,
): Promise<{ outcome: Outcome; answer?: Answer }> {
  const started = Date.now();
  let key = randomUUID();
  try {
    while (Date.now() - started < WRITE_DEADLINE_MS) {
      const a = await send(key);
      if (a.status >= 200 && a.status < 300) {
        ledger.acknowledged++;
        return { outcome: "acked", answer: a };
      }
      if (RETRYABLE.has(a.status)) {
        await sleep(200);
        continue;
      }
      if (a.status === 409 && /Idempotency-Key is still in progress/.test(a.body?.error?.message ?? "")) {
        // The first attempt's gateway died holding the key's claim; it expires, then the retry runs.
        ledger.claimWaits++;
        await sleep(Number(a.retryAfter ?? 1) * 1000);
        continue;
      }
      if (a.status === 409 && (await resolve())) {
        ledger.resolvedByReading++;
        return { outcome: "resolved" };
      }
      if (a.status === 409) {
        await sleep(500);
        continue;
      }
      ledger.anomalies.push(`${what}: ${a.status} ${JSON.stringify(a.body?.error ?? a.body).slice(0, 200)}`);
      // A stored 500 would be replayed to the same key forever.
      key = randomUUID();
      await sleep(500);
    }
    ledger.anomalies.push(`${what}: not settled within ${WRITE_DEADLINE_MS / 1000} s`);
    return { outcome: "failed" };
  } finally {
    const took = Date.now() - started;
    if (took > ledger.slowestWriteMs) {
      ledger.slowestWriteMs = took;
      ledger.slowestWrite = what;
    }
  }
}

async function read(api: Api, id: string): Promise<any | undefined> {
  for (;;) {
    const a = await api.call("GET", `/v1/databases/${id}`);
    if (a.status === 200) return a.body.data;
    if (a.status === 404) return undefined;
    await sleep(200);
  }
}

async function findByName(api: Api, name: string): Promise<any | undefined> {
  for (;;) {
    const a = await api.call("GET", "/v1/databases?per_page=100");
    if (a.status === 200) return (a.body.data.databases as any[]).find((d) => d.name === name);
    await sleep(200);
  }
}

/** Waits until the database shows one of `statuses`; false after `timeoutMs`. */
async function awaitStatus(api: Api, id: string, statuses: string[], timeoutMs = 60_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const db = await read(api, id);
    if (db && statuses.includes(db.status)) return true;
    await sleep(250);
  }
  return false;
}

export interface WriterOptions {
  /** Databases each writer keeps and cycles through. */
  perWriter: number;
  region: string;
  stopping: () => boolean;
}

/**
 * One writer: creates its databases, then renames, stops and starts each in
 * turn until told to stop; the write in progress is finished first.
 */
export async function runWriter(api: Api, ledger: Ledger, w: number, opts: WriterOptions): Promise<void> {
  const mine: string[] = [];
  let n = 0;
  const nextName = () => `fault-w${w}-${n++}`;
  while (!opts.stopping()) {
    if (mine.length < opts.perWriter) {
      const name = nextName();
      let found: any;
      const r = await settle(
        ledger,
        `create ${name}`,
        (key) => api.call("POST", "/v1/databases", { name, region: opts.region, tier: "micro" }, { "idempotency-key": key }),
        async () => {
          found = await findByName(api, name);
          return found !== undefined;
        },
      );
      const id = r.outcome === "acked" ? r.answer!.body.data.id : found?.id;
      if (id) {
        mine.push(id);
        ledger.expected.set(id, { name, desired: "running" });
      }
      continue;
    }
    for (const id of mine) {
      if (opts.stopping()) break;
      const name = nextName();
      const renamed = await settle(
        ledger,
        `rename ${id}`,
        () => api.call("PATCH", `/v1/databases/${id}`, { name }),
        async () => (await read(api, id))?.name === name,
      );
      if (renamed.outcome !== "failed") ledger.expected.get(id)!.name = name;
      if (opts.stopping()) break;
      if (!(await awaitStatus(api, id, ["running"]))) continue;
      const stopped = await settle(
        ledger,
        `stop ${id}`,
        (key) => api.call("POST", `/v1/databases/${id}/stop`, {}, { "idempotency-key": key }),
        async () => ["stopping", "stopped"].includes((await read(api, id))?.status),
      );
      if (stopped.outcome !== "failed") ledger.expected.get(id)!.desired = "stopped";
      if (!(await awaitStatus(api, id, ["stopped"]))) continue;
      const started = await settle(
        ledger,
        `start ${id}`,
        (key) => api.call("POST", `/v1/databases/${id}/start`, {}, { "idempotency-key": key }),
        async () => ["starting", "running"].includes((await read(api, id))?.status),
      );
      if (started.outcome !== "failed") ledger.expected.get(id)!.desired = "running";
    }
  }
}

export interface FinalCheck {
  lost: string[];
  stuck: string[];
}

/**
 * After the writers stopped: every acknowledged write must be visible (the
 * database exists, has the last name it was given, and settles in the last
 * state it was told) within `timeoutMs`. A database still in a transitional
 * status or `failed` then is stuck; one that settled elsewhere lost a write.
 */
export async function checkLedger(api: Api, ledger: Ledger, timeoutMs = 90_000): Promise<FinalCheck> {
  const deadline = Date.now() + timeoutMs;
  const lost: string[] = [];
  const stuck: string[] = [];
  for (const [id, want] of ledger.expected) {
    for (;;) {
      const db = await read(api, id);
      if (!db) {
        lost.push(`${id}: acknowledged create, database not found`);
        break;
      }
      if (db.name !== want.name) {
        lost.push(`${id}: acknowledged rename to ${want.name}, name is ${db.name}`);
        break;
      }
      if (db.status === want.desired) break;
      const settled = db.status === "running" || db.status === "stopped";
      if (Date.now() > deadline) {
        (settled ? lost : stuck).push(`${id}: acknowledged ${want.desired}, status ${db.status}`);
        break;
      }
      await sleep(500);
    }
  }
  return { lost, stuck };
}
