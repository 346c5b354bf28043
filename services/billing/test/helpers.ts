import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { expect } from "vitest";
import { createLogger, createPool, migrate, type Clock, type Logger } from "@dbaas/kit";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { StatusEventSchema, type StatusEvent } from "@dbaas/proto/billing";
import { createTestDatabase } from "@dbaas/test/support/pg";
import type { AppContext } from "../src/context.ts";
import { MIGRATIONS_DIR } from "../src/db/schema.ts";
import type { PaymentProcessor } from "../src/processor/processor.ts";
import { createTestProcessor } from "../src/processor/test-processor.ts";

export const SCHEMA = "billing";

/** A clock the test sets by hand. */
export class ManualClock implements Clock {
  constructor(private current: Date) {}
  now(): Date {
    return new Date(this.current);
  }
  set(iso: string): void {
    this.current = new Date(iso);
  }
}

/**
 * A fresh database with the billing schema migrated, and a context on it: the
 * test processor unless `processor` builds another (it gets the test clock).
 */
export async function createTestContext(
  now: string,
  opts: { log?: Logger; processor?: (clock: Clock) => PaymentProcessor; storageMaxGapMs?: number } = {},
): Promise<{
  ctx: AppContext;
  clock: ManualClock;
  /** The test database, for a second pool (another replica, or the process after a restart). */
  url: string;
  close(): Promise<void>;
}> {
  const db = await createTestDatabase("billing");
  const pool = createPool(db.url, SCHEMA);
  await migrate(pool, SCHEMA, MIGRATIONS_DIR);
  const clock = new ManualClock(new Date(now));
  const processor = (opts.processor ?? createTestProcessor)(clock);
  return {
    ctx: {
      pool,
      clock,
      log: opts.log ?? createLogger("billing-test"),
      processor,
      storageMaxGapMs: opts.storageMaxGapMs ?? 60_000,
      usageSampleRetentionDays: 40,
    },
    clock,
    url: db.url,
    async close() {
      await pool.end();
      await db.drop();
    },
  };
}

let seq = 0;

/** A status event; the id is unique unless given. */
export function statusEvent(
  organizationId: string,
  databaseId: string,
  tier: string,
  status: string,
  occurredAt: string,
  eventId = `evt-${++seq}-${Math.random().toString(36).slice(2, 10)}`,
): StatusEvent {
  return create(StatusEventSchema, {
    eventId,
    organizationId,
    databaseId,
    tier,
    status,
    occurredAt: timestampFromDate(new Date(occurredAt)),
  });
}

/** A read replica's status event (kind "replica"); the id is unique. */
export function replicaEvent(organizationId: string, replicaId: string, tier: string, status: string, occurredAt: string): StatusEvent {
  const event = statusEvent(organizationId, replicaId, tier, status, occurredAt);
  event.kind = "replica";
  return event;
}

/** The FieldViolations of an INVALID_ARGUMENT error, as plain objects. */
export function violationsOf(err: unknown): { field: string; message: string }[] {
  return ConnectError.from(err)
    .findDetails(FieldViolationSchema)
    .map((v) => ({ field: v.field, message: v.message }));
}

/** The error a call failed with; fails the test when the call succeeded. */
export async function rejection(p: Promise<unknown>): Promise<ConnectError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "call should have failed").toBeDefined();
  return ConnectError.from(err);
}
