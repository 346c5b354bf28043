import { systemClock } from "@dbaas/kit";
import { captureLog } from "@dbaas/test/support/log";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createMemoryIdempotencyStore, createRedisIdempotencyStore } from "../src/idempotency/store.ts";
import { connectRedis, type RedisLink } from "../src/redis.ts";

/**
 * Idempotency claims in real Redis are leases renewed by the gateway running
 * the request: a long request keeps its claim, and a gateway that dies
 * mid-request (its renewals stop) frees the key within a lease, not after the
 * longest time a request may take.
 */
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const LEASE_MS = 300;
const MAX_CLAIM_MS = 60_000;
let link: RedisLink;
const prefix = `idem-lease-${randomUUID()}:`;

beforeAll(async () => {
  link = connectRedis(REDIS_URL, captureLog());
  for (let i = 0; i < 50 && !link.usable(); i++) await new Promise((r) => setTimeout(r, 20));
  await link.client.ping();
});

afterAll(async () => {
  const keys = await link.client.keys(`${prefix}*`);
  if (keys.length > 0) await link.client.del(keys);
  await link.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A second gateway process: its own fallback, the same Redis. */
const store = (via: RedisLink) =>
  createRedisIdempotencyStore(via, prefix, MAX_CLAIM_MS, createMemoryIdempotencyStore(systemClock, MAX_CLAIM_MS), LEASE_MS);

it("a request running for many leases keeps its key claimed", async () => {
  const first = await store(link).claim("long", "fp");
  expect(first.kind).toBe("claimed");
  expect(await link.client.pTTL(`${prefix}idem:long`)).toBeLessThanOrEqual(LEASE_MS);
  await sleep(LEASE_MS * 4);
  expect(await store(link).claim("long", "fp")).toEqual({ kind: "in-progress", fingerprint: "fp" });
  if (first.kind === "claimed") await first.complete("answer");
  expect(await store(link).claim("long", "fp")).toEqual({ kind: "done", fingerprint: "fp", payload: "answer" });
});

it("the key of a gateway that died mid-request is free again within a lease", async () => {
  // The dying gateway's link: its commands stop reaching Redis once it is dead.
  let dead = false;
  const dying: RedisLink = {
    ...link,
    run: (command) => (dead ? Promise.reject(new Error("process gone")) : link.run(command)),
  };
  const first = await store(dying).claim("orphaned", "fp");
  expect(first.kind).toBe("claimed");
  dead = true;
  await sleep(LEASE_MS * 3);
  const retry = await store(link).claim("orphaned", "fp");
  expect(retry.kind).toBe("claimed");
  if (retry.kind === "claimed") await retry.release();
});
