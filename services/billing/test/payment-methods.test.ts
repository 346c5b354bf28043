import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { BillingService, type PaymentMethod } from "@dbaas/proto/billing";
import { captureLog } from "@dbaas/test/support/log";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes } from "../src/routes.ts";
import { createTestContext, type ManualClock, rejection, SCHEMA, violationsOf } from "./helpers.ts";

const NOW = "2025-03-20T12:00:00Z";

let env: Awaited<ReturnType<typeof createTestContext>>;
let client: Client<typeof BillingService>;
let clock: ManualClock;
const log = captureLog();
let orgSeq = 0;
const newOrg = () => `org-pm${++orgSeq}`;

beforeAll(async () => {
  env = await createTestContext(NOW, { log });
  clock = env.clock;
  client = createClient(BillingService, createRouterTransport(routes(env.ctx)));
});

afterAll(async () => {
  await env.close();
});

async function add(organizationId: string, token = "tok_visa"): Promise<PaymentMethod> {
  const { paymentMethod } = await client.addPaymentMethod({ organizationId, type: "card", token });
  return paymentMethod!;
}

async function list(organizationId: string): Promise<PaymentMethod[]> {
  return (await client.listPaymentMethods({ organizationId })).paymentMethods;
}

async function defaults(organizationId: string): Promise<string[]> {
  return (await list(organizationId)).filter((m) => m.isDefault).map((m) => m.id);
}

async function stored(sql: string, params: unknown[]): Promise<number> {
  return (await env.ctx.pool.query(`SELECT count(*)::int AS n FROM ${sql}`, params)).rows[0].n;
}

describe("AddPaymentMethod", () => {
  it("keeps what the processor reports about the card; the first method becomes the default", async () => {
    clock.set(NOW);
    const org = newOrg();
    const visa = await add(org, "tok_visa");
    expect(visa.id).toMatch(/^pm-[a-z0-9]{16}$/);
    expect(visa).toMatchObject({
      organizationId: org,
      type: "card",
      brand: "visa",
      last4: "4242",
      expMonth: 12,
      expYear: 2028,
      isDefault: true,
    });
    expect(timestampDate(visa.createdAt!).toISOString()).toBe("2025-03-20T12:00:00.000Z");

    const mastercard = await add(org, "tok_mastercard");
    const amex = await add(org, "tok_amex");
    // Accepted now; only charging it will fail.
    const declinesCharges = await add(org, "tok_chargeCustomerFail");
    expect([mastercard, amex, declinesCharges].map((m) => [m.brand, m.last4, m.isDefault])).toEqual([
      ["mastercard", "4444", false],
      ["amex", "8431", false],
      ["visa", "0341", false],
    ]);
    expect(new Set([visa.id, mastercard.id, amex.id, declinesCharges.id]).size).toBe(4);
    expect(await defaults(org)).toEqual([visa.id]);
  });

  it("declines a token the processor does not accept: INVALID_ARGUMENT on token, nothing stored", async () => {
    const org = newOrg();
    for (const token of ["tok_unknown", "tok_VISA", "pm_card_visa"]) {
      const err = await rejection(client.addPaymentMethod({ organizationId: org, type: "card", token }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toBe("the payment processor declined the token");
      expect(violationsOf(err)).toEqual([
        { field: "token", message: "was declined by the payment processor: it is not a valid card token" },
      ]);
    }
    expect(await list(org)).toEqual([]);
    expect(await stored("payment_methods WHERE organization_id = $1", [org])).toBe(0);
    expect((await client.getStanding({ organizationId: org })).hasDefaultPaymentMethod).toBe(false);
  });

  it("declines the cards the issuer declines, saying why", async () => {
    const org = newOrg();
    for (const [token, reason] of [
      ["tok_chargeDeclined", "the card was declined"],
      ["tok_chargeDeclinedExpiredCard", "the card has expired"],
    ]) {
      const err = await rejection(client.addPaymentMethod({ organizationId: org, type: "card", token: token! }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(violationsOf(err)).toEqual([{ field: "token", message: `was declined by the payment processor: ${reason}` }]);
    }
    expect(await list(org)).toEqual([]);
  });

  it("rejects a missing or unknown type and a malformed token before asking the processor", async () => {
    const org = newOrg();
    const cases: [string, string, { field: string; message: string }[]][] = [
      ["", "tok_visa", [{ field: "type", message: "is required" }]],
      ["bank_account", "tok_visa", [{ field: "type", message: "must be one of: card" }]],
      ["CARD", "tok_visa", [{ field: "type", message: "must be one of: card" }]],
      ["card", "", [{ field: "token", message: "is required" }]],
      ["card", "t".repeat(256), [{ field: "token", message: "must be 1-255 printable characters without spaces" }]],
      ["card", "tok visa", [{ field: "token", message: "must be 1-255 printable characters without spaces" }]],
      ["card", "tok_visa\n", [{ field: "token", message: "must be 1-255 printable characters without spaces" }]],
      ["card", "tok_vísa", [{ field: "token", message: "must be 1-255 printable characters without spaces" }]],
      [
        "",
        "",
        [
          { field: "type", message: "is required" },
          { field: "token", message: "is required" },
        ],
      ],
    ];
    for (const [type, token, expected] of cases) {
      const err = await rejection(client.addPaymentMethod({ organizationId: org, type, token }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(violationsOf(err)).toEqual(expected);
    }
    const noOrg = await rejection(client.addPaymentMethod({ organizationId: "", type: "card", token: "tok_visa" }));
    expect(violationsOf(noOrg)).toEqual([{ field: "organization_id", message: "is required" }]);
    // Not even a processor customer was made.
    expect(await stored("processor_customers WHERE organization_id = $1", [org])).toBe(0);
    expect(await list(org)).toEqual([]);

    // 255 printable characters is the longest token that reaches the processor (which declines this one).
    const longest = await rejection(client.addPaymentMethod({ organizationId: org, type: "card", token: "t".repeat(255) }));
    expect(violationsOf(longest)[0]?.message).toMatch(/^was declined by the payment processor/);
  });

  it("makes exactly one of several concurrent first adds the default", async () => {
    for (let round = 0; round < 5; round++) {
      const org = newOrg();
      const added = await Promise.all(Array.from({ length: 8 }, (_, i) => add(org, i % 2 ? "tok_visa" : "tok_mastercard")));
      expect(added.filter((m) => m.isDefault)).toHaveLength(1);
      expect(await list(org)).toHaveLength(8);
      expect(await defaults(org)).toEqual(added.filter((m) => m.isDefault).map((m) => m.id));
      // One processor customer for the organization, however many first adds raced.
      expect(await stored("processor_customers WHERE organization_id = $1", [org])).toBe(1);
    }
  });

  it("never stores or logs the token", async () => {
    const org = newOrg();
    log.lines.length = 0;
    await add(org, "tok_amex");
    await rejection(client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_not_to_be_kept_7f3a" }));
    await rejection(client.addPaymentMethod({ organizationId: org, type: "nope", token: "tok_visa" }));

    const tables = await env.ctx.pool.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
      [SCHEMA],
    );
    expect(tables.rows.map((r) => r.table_name)).toEqual(expect.arrayContaining(["payment_methods", "processor_customers"]));
    for (const { table_name } of tables.rows) {
      const rows = await env.ctx.pool.query<{ row: string }>(`SELECT t::text AS row FROM ${SCHEMA}.${table_name} t`);
      for (const { row } of rows.rows) expect(row, table_name).not.toMatch(/tok_/);
    }
    // The log said what happened, without the token.
    expect(log.lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining(["payment method added", "payment method declined by the processor"]),
    );
    expect(JSON.stringify(log.lines)).not.toMatch(/tok_/);
  });
});

describe("ListPaymentMethods", () => {
  it("lists the organization's own methods, oldest first", async () => {
    const org = newOrg();
    const other = newOrg();
    clock.set("2025-03-20T10:00:00Z");
    const second = await add(org, "tok_visa");
    clock.set("2025-03-19T10:00:00Z");
    const first = await add(org, "tok_mastercard");
    await add(other, "tok_amex");
    clock.set("2025-03-21T10:00:00Z");
    // Same instant: in the order they were added.
    const third = await add(org, "tok_amex");
    const fourth = await add(org, "tok_visa");

    const listed = await list(org);
    expect(listed.map((m) => m.id)).toEqual([first.id, second.id, third.id, fourth.id]);
    expect(listed.every((m) => m.organizationId === org)).toBe(true);
    // Listed as added: the default is the first one added, not the oldest.
    expect(listed.map((m) => m.isDefault)).toEqual([false, true, false, false]);
    expect(listed[2]).toEqual(third);
    expect((await list(other)).map((m) => m.brand)).toEqual(["amex"]);
    expect(await list(newOrg())).toEqual([]);
  });

  it("rejects a missing organization id", async () => {
    const err = await rejection(client.listPaymentMethods({ organizationId: "" }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([{ field: "organization_id", message: "is required" }]);
  });
});

describe("UpdatePaymentMethod", () => {
  it("makes a method the default and the previous default stops being it", async () => {
    clock.set(NOW);
    const org = newOrg();
    const a = await add(org, "tok_visa");
    const b = await add(org, "tok_mastercard");
    const c = await add(org, "tok_amex");

    const { paymentMethod } = await client.updatePaymentMethod({ organizationId: org, id: b.id, isDefault: true });
    expect(paymentMethod).toEqual({ ...b, isDefault: true });
    expect(await defaults(org)).toEqual([b.id]);

    // Again: no change.
    await client.updatePaymentMethod({ organizationId: org, id: b.id, isDefault: true });
    expect(await defaults(org)).toEqual([b.id]);

    await client.updatePaymentMethod({ organizationId: org, id: c.id, isDefault: true });
    expect((await list(org)).map((m) => [m.id, m.isDefault])).toEqual([
      [a.id, false],
      [b.id, false],
      [c.id, true],
    ]);
  });

  it("refuses to clear the default, and leaves a non-default or an unset flag as it is", async () => {
    const org = newOrg();
    const a = await add(org, "tok_visa");
    const b = await add(org, "tok_mastercard");

    const err = await rejection(client.updatePaymentMethod({ organizationId: org, id: a.id, isDefault: false }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      {
        field: "default",
        message: "cannot be cleared on the default payment method; make another payment method the default instead",
      },
    ]);
    expect(await defaults(org)).toEqual([a.id]);

    expect((await client.updatePaymentMethod({ organizationId: org, id: b.id, isDefault: false })).paymentMethod).toEqual(b);
    expect((await client.updatePaymentMethod({ organizationId: org, id: b.id })).paymentMethod).toEqual(b);
    expect((await client.updatePaymentMethod({ organizationId: org, id: a.id })).paymentMethod).toEqual(a);
    expect(await defaults(org)).toEqual([a.id]);
  });

  it("answers NOT_FOUND for another organization's method or an unknown id, changing nothing", async () => {
    const mine = newOrg();
    const theirs = newOrg();
    const myDefault = await add(mine, "tok_visa");
    const theirDefault = await add(theirs, "tok_visa");
    const theirOther = await add(theirs, "tok_amex");

    for (const isDefault of [true, false, undefined]) {
      for (const id of [theirOther.id, theirDefault.id, "pm-doesnotexist0000", "db-abc"]) {
        const err = await rejection(client.updatePaymentMethod({ organizationId: mine, id, isDefault }));
        expect(err.code).toBe(Code.NotFound);
        expect(err.rawMessage).toBe("payment method not found");
      }
    }
    expect(await defaults(mine)).toEqual([myDefault.id]);
    expect(await defaults(theirs)).toEqual([theirDefault.id]);
    expect(await list(mine)).toHaveLength(1);
  });

  it("rejects a missing organization id or payment method id", async () => {
    const err = await rejection(client.updatePaymentMethod({ organizationId: "", id: "", isDefault: true }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(violationsOf(err)).toEqual([
      { field: "organization_id", message: "is required" },
      { field: "id", message: "is required" },
    ]);
  });

  it("leaves exactly one default after concurrent switches, and concurrent adds alongside", async () => {
    const org = newOrg();
    const methods: PaymentMethod[] = [];
    for (let i = 0; i < 6; i++) methods.push(await add(org, "tok_visa"));
    for (let round = 0; round < 5; round++) {
      const targets = Array.from({ length: 12 }, (_, i) => methods[(i * 5 + round) % methods.length]!.id);
      const results = await Promise.all([
        ...targets.map((id) => client.updatePaymentMethod({ organizationId: org, id, isDefault: true })),
        add(org, "tok_mastercard"),
      ]);
      expect(results.slice(0, -1).every((r) => "paymentMethod" in r && r.paymentMethod?.isDefault)).toBe(true);
      const now = await defaults(org);
      expect(now).toHaveLength(1);
      expect(targets).toContain(now[0]);
    }
    expect(await list(org)).toHaveLength(11);
  });
});

describe("GetStanding", () => {
  it("says whether the organization has a default payment method", async () => {
    const org = newOrg();
    expect((await client.getStanding({ organizationId: org })).hasDefaultPaymentMethod).toBe(false);
    await rejection(client.addPaymentMethod({ organizationId: org, type: "card", token: "tok_bogus" }));
    expect((await client.getStanding({ organizationId: org })).hasDefaultPaymentMethod).toBe(false);
    await add(org, "tok_chargeCustomerFail");
    expect((await client.getStanding({ organizationId: org })).hasDefaultPaymentMethod).toBe(true);
    // Another organization's card is not this one's.
    expect((await client.getStanding({ organizationId: newOrg() })).hasDefaultPaymentMethod).toBe(false);

    const err = await rejection(client.getStanding({ organizationId: "" }));
    expect(violationsOf(err)).toEqual([{ field: "organization_id", message: "is required" }]);
  });
});

describe("payment_methods table", () => {
  it("refuses a second default for an organization whatever writes it", async () => {
    const org = newOrg();
    await add(org, "tok_visa");
    const second = await add(org, "tok_amex");
    const err = await env.ctx.pool.query("UPDATE payment_methods SET is_default = true WHERE id = $1", [second.id]).then(
      () => undefined,
      (e: { code?: string; constraint?: string }) => e,
    );
    expect(err).toMatchObject({ code: "23505", constraint: "payment_methods_one_default" });
  });
});
