import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { BillingService, type PaymentMethod } from "@dbaas/proto/billing";
import { captureLog } from "@dbaas/test/support/log";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startInvoicing } from "../src/background.ts";
import type { AppContext } from "../src/context.ts";
import { ProcessorError, type PaymentProcessor } from "../src/processor/processor.ts";
import { createTestProcessor } from "../src/processor/test-processor.ts";
import { routes } from "../src/routes.ts";
import { startFakeIdentity, type FakeIdentity } from "./fake-identity.ts";
import { createTestContext, type ManualClock, rejection, replicaEvent, statusEvent as ev, violationsOf } from "./helpers.ts";

const NOW = "2025-03-20T12:00:00Z";

/**
 * The test processor, with switches: `failDetach` makes detaching fail as an
 * unreachable processor does; `replayRef` makes the next attach hand back that
 * instrument again, as Stripe replays a repeated request.
 */
function switchable(inner: ReturnType<typeof createTestProcessor>) {
  const state = { failDetach: false, replayRef: undefined as string | undefined };
  const processor: PaymentProcessor = {
    name: inner.name,
    createCustomer: (org) => inner.createCustomer(org),
    charge: (req) => inner.charge(req),
    async attachCard(customer, token) {
      const result = await inner.attachCard(customer, token);
      if (!result.accepted || !state.replayRef) return result;
      return { accepted: true, card: { ...result.card, ref: state.replayRef } };
    },
    async detachCard(customer, ref) {
      if (state.failDetach) throw new ProcessorError("test processor unreachable", true);
      await inner.detachCard(customer, ref);
    },
  };
  return { processor, state, detached: inner.detached };
}

let env: Awaited<ReturnType<typeof createTestContext>>;
let ctx: AppContext;
let identity: FakeIdentity;
let client: Client<typeof BillingService>;
let clock: ManualClock;
let sw: ReturnType<typeof switchable>;
const log = captureLog();
let orgSeq = 0;
const newOrg = () => `org-pmrm${++orgSeq}`;

beforeAll(async () => {
  env = await createTestContext(NOW, {
    log,
    processor: (c) => {
      sw = switchable(createTestProcessor(c));
      return sw.processor;
    },
  });
  clock = env.clock;
  identity = await startFakeIdentity();
  ctx = { ...env.ctx, identity: identity.client };
  client = createClient(BillingService, createRouterTransport(routes(ctx)));
});

afterAll(async () => {
  await identity?.close();
  await env?.close();
});

beforeEach(() => {
  clock.set(NOW);
  sw.state.failDetach = false;
  sw.state.replayRef = undefined;
  identity.failing = false;
});

async function add(organizationId: string, token = "tok_visa"): Promise<PaymentMethod> {
  return (await client.addPaymentMethod({ organizationId, type: "card", token })).paymentMethod!;
}

const list = async (organizationId: string) => (await client.listPaymentMethods({ organizationId })).paymentMethods;
const remove = (organizationId: string, id: string) => client.deletePaymentMethod({ organizationId, id });

async function stored(id: string): Promise<{ ref: string; removed: boolean; detached: boolean }> {
  const { rows } = await ctx.pool.query(
    "SELECT processor_ref AS ref, removed_at IS NOT NULL AS removed, detached_at IS NOT NULL AS detached FROM payment_methods WHERE id = $1",
    [id],
  );
  return rows[0];
}

/** Databases as billing's status events have them now. */
async function databases(org: string, ...dbs: [id: string, tier: string, status: string][]): Promise<void> {
  await client.recordStatusEvents({ events: dbs.map(([id, tier, status]) => ev(org, id, tier, status, "2025-03-20T10:00:00Z")) });
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await rejection(p);
  expect(err.code, err.message).toBe(Code.FailedPrecondition);
  return err.rawMessage;
}

describe("DeletePaymentMethod", () => {
  it("removes a method that is not the default at once, whatever runs, and detaches it at the processor", async () => {
    const org = newOrg();
    const visa = await add(org);
    const mastercard = await add(org, "tok_mastercard");
    await databases(org, ["db-big", "xlarge", "running"]);
    identity.plans.set(org, "pro");

    await remove(org, mastercard.id);
    expect((await list(org)).map((m) => m.id)).toEqual([visa.id]);
    const row = await stored(mastercard.id);
    expect(row).toMatchObject({ removed: true, detached: true });
    expect(sw.detached.has(row.ref)).toBe(true);
    // The default is untouched.
    expect((await client.getStanding({ organizationId: org })).hasDefaultPaymentMethod).toBe(true);
  });

  it("refuses to remove the default while another method exists: make another one the default first", async () => {
    const org = newOrg();
    const visa = await add(org);
    const mastercard = await add(org, "tok_mastercard");
    expect(await refusal(remove(org, visa.id))).toBe(
      "the default payment method can be removed only when it is the last one: make another payment method the default first " +
        "(PATCH /v1/billing/payment-methods/{id} with default: true), then remove this one",
    );
    expect((await list(org)).map((m) => m.id)).toEqual([visa.id, mastercard.id]);
    expect(sw.detached.has((await stored(visa.id)).ref)).toBe(false);

    // Doing what the message says works.
    await client.updatePaymentMethod({ organizationId: org, id: mastercard.id, isDefault: true });
    await remove(org, visa.id);
    expect((await list(org)).map((m) => [m.id, m.isDefault])).toEqual([[mastercard.id, true]]);
  });

  it("refuses to remove the last one while databases beyond the free allowance run: stop them first", async () => {
    const org = newOrg();
    const visa = await add(org);
    await databases(org, ["db-a", "micro", "running"], ["db-b", "small", "starting"], ["db-c", "large", "stopped"]);
    const message = await refusal(remove(org, visa.id));
    expect(message).toBe(
      "the organization runs more than the free allowance (at most 2 micro databases), which needs a payment method: " +
        "db-a (micro), db-b (small); stop the databases that need a card (POST /v1/databases/{id}/stop) before removing the last payment method",
    );

    // Three micro ones are beyond it too.
    await databases(org, ["db-b", "small", "stopping"], ["db-d", "micro", "provisioning"], ["db-e", "micro", "failed"]);
    expect(await refusal(remove(org, visa.id))).toContain("db-a (micro), db-d (micro), db-e (micro)");

    // Two micro ones fit: the card may go.
    await databases(org, ["db-e", "micro", "deleted"]);
    await remove(org, visa.id);
    expect(await list(org)).toEqual([]);
    expect(await client.getStanding({ organizationId: org })).toMatchObject({ hasDefaultPaymentMethod: false });
    expect(await stored(visa.id)).toMatchObject({ removed: true, detached: true });
  });

  it("refuses to remove the last one while a read replica runs, even within the free allowance: delete it first", async () => {
    const org = newOrg();
    const visa = await add(org);
    await databases(org, ["db-a", "micro", "running"]);
    const replica = (status: string) => replicaEvent(org, "rep-a", "micro", status, "2025-03-20T11:00:00Z");
    await client.recordStatusEvents({ events: [replica("provisioning")] });
    expect(await refusal(remove(org, visa.id))).toBe(
      "the organization runs read replicas, which need a payment method: rep-a (micro); " +
        "delete them (DELETE /v1/databases/{id}/replicas/{replica_id}) before removing the last payment method",
    );
    // A promoted replica is a database now: one micro database more, still within the allowance.
    await client.recordStatusEvents({ events: [replica("promoted")] });
    await databases(org, ["db-b", "micro", "starting"]);
    identity.plans.set(org, "free");
    await remove(org, visa.id);
    expect(await list(org)).toEqual([]);
  });

  it("refuses to remove the last one on a paid plan; asks identity, and says so when it cannot", async () => {
    const org = newOrg();
    const visa = await add(org);
    for (const plan of ["pro", "enterprise"]) {
      identity.plans.set(org, plan);
      expect(await refusal(remove(org, visa.id))).toBe(
        `the ${plan} plan needs a payment method: move the organization to the free plan first (PATCH /v1/organization)`,
      );
    }
    identity.failing = true;
    const err = await rejection(remove(org, visa.id));
    // ABORTED with reason service_unavailable (the API's 503), never UNAVAILABLE, which a client resends.
    expect([err.code, err.rawMessage]).toEqual([Code.Aborted, "could not check the organization's plan; try again shortly"]);
    expect((await list(org)).map((m) => m.id)).toEqual([visa.id]);

    identity.failing = false;
    identity.plans.set(org, "free");
    await remove(org, visa.id);
    expect(await list(org)).toEqual([]);
  });

  it("lets the last one of an organization identity no longer knows go", async () => {
    const org = newOrg();
    const visa = await add(org);
    identity.unknown.add(org);
    await remove(org, visa.id);
    expect(await list(org)).toEqual([]);
  });

  it("answers NOT_FOUND for an unknown id, another organization's method and one already removed", async () => {
    const org = newOrg();
    const visa = await add(org);
    const other = await add(newOrg());
    await remove(org, visa.id);
    for (const [organizationId, id] of [
      [org, visa.id],
      [org, other.id],
      [org, "pm-doesnotexist0000"],
    ] as const) {
      const err = await rejection(remove(organizationId, id));
      expect([err.code, err.rawMessage]).toEqual([Code.NotFound, "payment method not found"]);
    }
    // Nor can a removed one be made the default again.
    expect((await rejection(client.updatePaymentMethod({ organizationId: org, id: visa.id, isDefault: true }))).code).toBe(Code.NotFound);
    expect(violationsOf(await rejection(remove(org, "")))).toEqual([{ field: "id", message: "is required" }]);
  });

  it("after the last one went, the next card added becomes the default", async () => {
    const org = newOrg();
    await remove(org, (await add(org)).id);
    const next = await add(org, "tok_mastercard");
    expect(next.isDefault).toBe(true);
  });

  it("removes even when the processor cannot be reached, and the invoicing loop detaches it later", async () => {
    const org = newOrg();
    await add(org);
    const mastercard = await add(org, "tok_mastercard");
    sw.state.failDetach = true;
    log.lines.length = 0;
    await remove(org, mastercard.id);
    expect((await list(org)).map((m) => m.id)).not.toContain(mastercard.id);
    expect(await stored(mastercard.id)).toMatchObject({ removed: true, detached: false });
    expect(
      log.lines.some(
        (l) => l.msg === "detaching a removed payment method failed; retried later" && l.fields.payment_method_id === mastercard.id,
      ),
    ).toBe(true);

    sw.state.failDetach = false;
    const stop = new AbortController();
    const loop = startInvoicing(ctx, stop.signal, 60_000);
    for (let i = 0; i < 100 && !(await stored(mastercard.id)).detached; i++) await new Promise((r) => setTimeout(r, 20));
    stop.abort();
    await loop;
    expect(await stored(mastercard.id)).toMatchObject({ removed: true, detached: true });
    expect(sw.detached.has((await stored(mastercard.id)).ref)).toBe(true);
  });

  it("refuses a token whose instrument the processor hands back after it was removed", async () => {
    const org = newOrg();
    await add(org);
    const mastercard = await add(org, "tok_mastercard");
    await remove(org, mastercard.id);
    sw.state.replayRef = (await stored(mastercard.id)).ref;
    const err = await rejection(add(org, "tok_mastercard"));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      { field: "token", message: "was already used for a payment method that has since been removed; use a new token" },
    ]);
    expect((await list(org)).map((m) => m.id)).not.toContain(mastercard.id);
  });

  it("never charges a removed method: an invoice closed after the last one went is past due", async () => {
    const org = newOrg();
    const visa = await add(org);
    await client.recordStatusEvents({
      events: [ev(org, "db-a", "micro", "running", "2025-02-01T00:00:00Z"), ev(org, "db-a", "micro", "stopped", "2025-02-11T00:00:00Z")],
    });
    await remove(org, visa.id);
    const stop = new AbortController();
    const loop = startInvoicing(ctx, stop.signal, 60_000);
    let invoices: Awaited<ReturnType<typeof client.listInvoices>>["invoices"] = [];
    for (let i = 0; i < 100 && invoices[0]?.status !== "past_due"; i++) {
      await new Promise((r) => setTimeout(r, 20));
      invoices = (await client.listInvoices({ organizationId: org })).invoices;
    }
    stop.abort();
    await loop;
    expect(invoices.map((i) => [i.period, i.status])).toEqual([["2025-02", "past_due"]]);
    expect((await ctx.pool.query("SELECT count(*)::int AS n FROM charge_attempts WHERE payment_method_id = $1", [visa.id])).rows[0].n).toBe(
      0,
    );
  });
});
