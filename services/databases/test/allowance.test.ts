import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createDb, createHarness, expectCode, registerAgent, resetTables, type Harness } from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h?.close();
});

let org: string;
let n = 0;

beforeEach(async () => {
  await resetTables(h);
  await registerAgent(h, "allow-a", { capacity: 50 });
  org = `org-allow-${++n}`;
  h.billing.withoutPaymentMethod.clear();
  h.billing.withPastDueInvoice.clear();
  h.billing.withoutPaymentMethod.add(org);
  h.billing.standingAsked.length = 0;
  h.billing.standingFailure = undefined;
});

async function expectPaymentRequired(p: Promise<unknown>) {
  const err = await expectCode(p, Code.FailedPrecondition);
  expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["payment_required"]);
  expect(err.rawMessage).toMatch(/payment method/);
}

/** What the agent's report would do: the database reaches `status`. */
async function reaches(id: string, status: string) {
  await h.ctx.pool.query("UPDATE databases SET status = $2 WHERE id = $1", [id, status]);
}

async function liveCount(organizationId: string): Promise<number> {
  const { rows } = await h.ctx.pool.query("SELECT count(*)::int AS n FROM databases WHERE organization_id = $1 AND deleted_at IS NULL", [
    organizationId,
  ]);
  return rows[0].n;
}

describe("the free allowance (no payment method: at most 2 micro databases running)", () => {
  it("lets two micro databases in without asking billing, refuses a third and anything larger, writing nothing", async () => {
    await createDb(h, org, { tier: "micro" });
    await createDb(h, org, { tier: "micro" });
    expect(h.billing.standingAsked).toEqual([]);
    await expectPaymentRequired(createDb(h, org, { tier: "micro" }));
    await expectPaymentRequired(createDb(h, org, { tier: "small" }));
    expect(await liveCount(org)).toBe(2);
    expect(h.billing.standingAsked).toEqual([org, org]);
  });

  it("refuses a larger tier even as the first database", async () => {
    await expectPaymentRequired(createDb(h, org, { tier: "small" }));
    expect(await liveCount(org)).toBe(0);
  });

  it("lets an organization with a payment method run more and larger", async () => {
    h.billing.withoutPaymentMethod.delete(org);
    for (const tier of ["micro", "micro", "micro", "small"]) await createDb(h, org, { tier });
    expect(await liveCount(org)).toBe(4);
  });

  it("holds an organization with a past-due invoice to the free allowance too, saying so", async () => {
    h.billing.withoutPaymentMethod.delete(org);
    h.billing.withPastDueInvoice.add(org);
    await createDb(h, org, { tier: "micro" });
    const err = await expectCode(createDb(h, org, { tier: "small" }), Code.FailedPrecondition);
    expect(err.findDetails(ErrorReasonSchema).map((r) => r.code)).toEqual(["payment_required"]);
    expect(err.rawMessage).toMatch(/invoice is past due/);
    h.billing.withPastDueInvoice.delete(org);
    await createDb(h, org, { tier: "small" });
  });

  it("counts running databases only: a stopped one frees its slot, and starting it again must fit", async () => {
    const a = await createDb(h, org, { tier: "micro" });
    await createDb(h, org, { tier: "micro" });
    await reaches(a.database!.id, "running");
    await h.dbs.stopDatabase({ organizationId: org, id: a.database!.id });
    await createDb(h, org, { tier: "micro" });
    await reaches(a.database!.id, "stopped");
    await expectPaymentRequired(h.dbs.startDatabase({ organizationId: org, id: a.database!.id }));
  });

  it("refuses resizing a running micro database up, allows it while stopped, and then refuses the start", async () => {
    const a = await createDb(h, org, { tier: "micro" });
    await reaches(a.database!.id, "running");
    await expectPaymentRequired(h.dbs.resizeDatabase({ organizationId: org, id: a.database!.id, tier: "small" }));
    await h.dbs.stopDatabase({ organizationId: org, id: a.database!.id });
    await reaches(a.database!.id, "stopped");
    const resized = await h.dbs.resizeDatabase({ organizationId: org, id: a.database!.id, tier: "small" });
    expect(resized.database!.tier).toBe("small");
    await reaches(a.database!.id, "stopped");
    await expectPaymentRequired(h.dbs.startDatabase({ organizationId: org, id: a.database!.id }));
  });

  it("never stands in the way of restarting what already runs", async () => {
    h.billing.withoutPaymentMethod.delete(org);
    const dbs = [];
    for (const tier of ["micro", "small", "micro"]) dbs.push(await createDb(h, org, { tier }));
    // The payment method is gone (say, the card expired): what runs keeps running and can be restarted.
    h.billing.withoutPaymentMethod.add(org);
    h.billing.standingAsked.length = 0;
    for (const db of dbs) await reaches(db.database!.id, "running");
    for (const db of dbs) await h.dbs.restartDatabase({ organizationId: org, id: db.database!.id });
    expect(h.billing.standingAsked).toEqual([]);
  });

  it("answers ABORTED (a failed dependency, the API's 503) when billing cannot be asked, and needs billing only beyond the allowance", async () => {
    h.billing.standingFailure = new ConnectError("billing is down", Code.Unavailable);
    await createDb(h, org, { tier: "micro" });
    await createDb(h, org, { tier: "micro" });
    const err = await expectCode(createDb(h, org, { tier: "micro" }), Code.Aborted);
    expect(err.rawMessage).not.toMatch(/billing is down/);
    expect(await liveCount(org)).toBe(2);
  });

  it("lets exactly two of many concurrent creates in", async () => {
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => createDb(h, org, { tier: "micro" })));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(2);
    for (const r of results) {
      if (r.status === "rejected") expect(Code[(r.reason as ConnectError).code]).toBe("FailedPrecondition");
    }
    expect(await liveCount(org)).toBe(2);
  });
});
