/**
 * The deterministic part of the fuzz suite (`npm run fuzz` is the full run):
 * a fixed seed, ~1,500 requests over every operation of the served document
 * plus raw malformed HTTP, against a real stack. Any 5xx, 4xx without the
 * envelope or leaked internal detail fails it, with the requests that did.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFixture, type Fixture } from "./fixture.ts";
import { judge } from "./oracle.ts";
import { seedFromEnv } from "./prng.ts";
import { runFuzz, summarize } from "./run.ts";

const SEED = seedFromEnv(process.env, 20_251_124);
const REQUESTS = Number(process.env.FUZZ_REQUESTS || 1_500);

describe("the oracle", () => {
  const ok = { "x-request-id": "req_1", "content-type": "application/json; charset=utf-8" };
  const envelope = (code: string) =>
    Buffer.from(JSON.stringify({ error: { code, message: "m", details: [] }, meta: { request_id: "req_1" } }));
  const codes = new Set(["validation_error", "internal_error"]);

  it("fails a 500, even in the envelope", () => {
    expect(judge("GET", "/v1/x", { status: 500, headers: ok, body: envelope("internal_error") }, codes).map((p) => p.kind)).toEqual([
      "5xx",
    ]);
  });
  it("fails a 4xx without the envelope or without X-Request-Id", () => {
    expect(judge("GET", "/v1/x", { status: 400, headers: {}, body: Buffer.alloc(0) }, codes).map((p) => p.kind)).toEqual([
      "no X-Request-Id",
      "4xx without envelope",
    ]);
  });
  it("fails a stack trace or a SQL error in a body", () => {
    const trace = Buffer.from(
      JSON.stringify({
        error: { code: "validation_error", message: "Error: x\n    at f (/srv/app/src/a.ts:1:2)", details: [] },
        meta: { request_id: "req_1" },
      }),
    );
    expect(judge("POST", "/v1/x", { status: 422, headers: ok, body: trace }, codes)[0]?.kind).toMatch(/^leak: /);
    const sql = Buffer.from(
      JSON.stringify({
        error: { code: "validation_error", message: 'new row violates check constraint "x"', details: [] },
        meta: { request_id: "req_1" },
      }),
    );
    expect(judge("POST", "/v1/x", { status: 422, headers: ok, body: sql }, codes)[0]?.kind).toBe("leak: SQL error");
  });
  it("passes a documented 4xx in the envelope", () => {
    expect(judge("GET", "/v1/x", { status: 422, headers: ok, body: envelope("validation_error") }, codes)).toEqual([]);
  });
});

describe(`fuzz (seed ${SEED}, ${REQUESTS} requests)`, () => {
  let fixture: Fixture;

  beforeAll(async () => {
    fixture = await startFixture();
  }, 180_000);

  afterAll(async () => {
    await fixture?.close();
  });

  it("no 5xx, every 4xx in the envelope, no internal detail in any body", async () => {
    const lines: string[] = [];
    const report = await runFuzz(fixture, { seed: SEED, requests: REQUESTS, log: (l) => lines.push(l) });
    const summary = summarize(report);
    console.log(summary);
    expect(report.sent).toBe(REQUESTS);
    expect(report.raw).toBeGreaterThan(0);
    expect(report.failures.length, summary).toBe(0);
  }, 120_000);

  it("left the fixture as it found it (the generator keeps destructive requests harmless)", async () => {
    expect(await fixture.check()).toEqual([]);
  });
});
