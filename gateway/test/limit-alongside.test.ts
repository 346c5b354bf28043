import type { AddressInfo } from "node:net";
import type { Clock } from "@dbaas/kit";
import express, { type ErrorRequestHandler } from "express";
import { afterEach, describe, expect, it } from "vitest";
import type { GatewayContext } from "../src/context.ts";
import { ApiError } from "../src/errors.ts";
import { ok } from "../src/middleware/envelope.ts";
import { createHeadroom, limitAlongside } from "../src/middleware/rate-limit.ts";
import { stampResponses } from "../src/middleware/security-headers.ts";
import { createLocalLimiter, type RateLimiter } from "../src/rate-limit/limiter.ts";
import { principal } from "./support/stubs.ts";

const clock: Clock = { now: () => new Date("2026-03-02T10:00:30Z") };

const servers: Array<{ close(): void }> = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

interface Answer {
  status: number;
  body: any;
  remaining: string | null;
  /** Whether the read had started by the time the limiter was asked (before it decided). */
  readAhead: boolean;
}

/**
 * One GET route guarded by limitAlongside for an organization on `plan`, in
 * front of the real local limiter held at a gate: each request is answered
 * only once the test lets the limiter decide, so the test sees whether the
 * read started before the decision.
 */
async function route(opts: { plan: string; permitted?: boolean; read: () => Promise<unknown> }) {
  const real = createLocalLimiter(clock);
  const held: Array<() => void> = [];
  const limiter: RateLimiter = {
    consume: async (subject, windows) => {
      await new Promise<void>((release) => held.push(release));
      return await real.consume(subject, windows);
    },
  };
  let reads = 0;
  const app = express();
  stampResponses(app, "http://gateway.test");
  app.get("/r", (_req, res, next) => {
    res.locals.requestId = "req_test";
    const permissions = opts.permitted === false ? [] : ["databases:read"];
    res.locals.principal = principal({ org: "org-a", plan: opts.plan, permissions });
    next();
  });
  app.get(
    "/r",
    limitAlongside({ limiter } as unknown as GatewayContext, createHeadroom(), "databases:read", async () => {
      reads++;
      return ok(await opts.read());
    }),
  );
  app.use(((err: ApiError, _req, res, _next) => {
    res.status(err.status).json({ code: err.code });
  }) as ErrorRequestHandler);
  const server = app.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  servers.push(server);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/r`;

  /** Sends `n` requests at once; lets the limiter decide once all of them have asked it. */
  const send = async (n = 1): Promise<Answer[]> => {
    const before = reads;
    const answers = Array.from({ length: n }, () => fetch(url));
    while (held.length < n) await new Promise((r) => setTimeout(r, 1));
    // The route asks the limiter and starts a read ahead in the same turn: both are visible now.
    const readAhead = reads - before;
    for (const release of held.splice(0)) release();
    return await Promise.all(
      answers.map(async (a, i) => {
        const res = await a;
        const body: any = await res.json();
        return { status: res.status, body, remaining: res.headers.get("x-ratelimit-remaining"), readAhead: i < readAhead };
      }),
    );
  };
  return { send, reads: () => reads };
}

const statuses = (answers: Answer[]) => answers.map((a) => a.status).sort();

describe("limitAlongside", () => {
  it("waits for the limiter before reading for an organization it has not seen", async () => {
    const r = await route({ plan: "pro", read: async () => ({ id: "db-1" }) });
    const [first] = await r.send();
    expect(first).toMatchObject({ readAhead: false, status: 200, body: { data: { id: "db-1" } }, remaining: "999" });
  });

  it("reads while the limiter decides once the organization has headroom, and answers the same", async () => {
    const r = await route({ plan: "pro", read: async () => ({ id: "db-1" }) });
    await r.send();
    const [second] = await r.send();
    expect(second).toMatchObject({ readAhead: true, status: 200, body: { data: { id: "db-1" } }, remaining: "998" });
  });

  it("answers 429 to requests refused after their read started; the reads' results are dropped", async () => {
    // Free: 60 a minute. After 54, 6 are left: a tenth, still headroom.
    const r = await route({ plan: "free", read: async () => ({ id: "db-1" }) });
    for (let i = 0; i < 54; i++) expect((await r.send())[0]!.status).toBe(200);
    const burst = await r.send(10);
    expect(burst.every((a) => a.readAhead)).toBe(true);
    expect(statuses(burst)).toEqual([200, 200, 200, 200, 200, 200, 429, 429, 429, 429]);
    for (const refused of burst.filter((a) => a.status === 429)) {
      expect(refused.body).toEqual({ code: "rate_limit_exceeded" });
      expect(refused.remaining).toBe("0");
    }
  });

  it("stops reading ahead for an organization close to its limit or refused", async () => {
    const r = await route({ plan: "free", read: async () => ({ id: "db-1" }) });
    for (let i = 0; i < 55; i++) await r.send();
    // 5 of 60 left: less than a tenth.
    const rest = [];
    for (let i = 0; i < 7; i++) rest.push((await r.send())[0]!);
    expect(rest.map((a) => [a.readAhead, a.status])).toEqual([
      [false, 200],
      [false, 200],
      [false, 200],
      [false, 200],
      [false, 200],
      [false, 429],
      [false, 429],
    ]);
  });

  it("counts a request without the permission, answers 429 before 403, and never reads for it", async () => {
    const r = await route({ plan: "free", permitted: false, read: async () => ({ id: "db-1" }) });
    for (let i = 0; i < 60; i++) {
      const [res] = await r.send();
      expect(res).toMatchObject({ status: 403, remaining: String(59 - i) });
    }
    expect((await r.send())[0]!.status).toBe(429);
    expect(r.reads()).toBe(0);
  });

  it("answers a failed read once allowed, and drops one that failed for a refused request without an unhandled rejection", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on("unhandledRejection", onUnhandled);
    try {
      const r = await route({
        plan: "free",
        read: async () => {
          throw new ApiError(404, "resource_not_found", "database not found");
        },
      });
      for (let i = 0; i < 54; i++) expect((await r.send())[0]!.status).toBe(404);
      const burst = await r.send(10);
      expect(burst.every((a) => a.readAhead)).toBe(true);
      expect(statuses(burst)).toEqual([404, 404, 404, 404, 404, 404, 429, 429, 429, 429]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
