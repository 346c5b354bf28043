import { ConfigError, createLogger } from "@dbaas/kit";
import { describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";
import { createContext } from "../src/context.ts";

const base = { DATABASE_URL: "postgres://x@127.0.0.1/db", INTERNAL_AUTH_SECRET: "s" };
const KEY = "sk_live_config_test_9f8e7d";

describe("billing config", () => {
  it("uses the test processor unless told otherwise", () => {
    expect(readConfig(base).processor).toEqual({ kind: "test" });
    expect(readConfig({ ...base, PAYMENT_PROCESSOR: "test", STRIPE_SECRET_KEY: KEY }).processor).toEqual({ kind: "test" });
  });

  it("reads Stripe's secret key and API base", () => {
    expect(readConfig({ ...base, PAYMENT_PROCESSOR: "stripe", STRIPE_SECRET_KEY: KEY }).processor).toEqual({
      kind: "stripe",
      secretKey: KEY,
      apiBase: "https://api.stripe.com/v1",
    });
    const local = readConfig({
      ...base,
      PAYMENT_PROCESSOR: "stripe",
      STRIPE_SECRET_KEY: KEY,
      STRIPE_API_BASE: "http://127.0.0.1:12111/v1",
    });
    expect(local.processor).toMatchObject({ apiBase: "http://127.0.0.1:12111/v1" });
  });

  it("fails fast on an unknown processor, Stripe without a key, or an API base that is not a URL", () => {
    expect(() => readConfig({ ...base, PAYMENT_PROCESSOR: "paypal" })).toThrow(/PAYMENT_PROCESSOR must be test or stripe/);
    expect(() => readConfig({ ...base, PAYMENT_PROCESSOR: "stripe" })).toThrow(
      new ConfigError("missing required environment variable STRIPE_SECRET_KEY"),
    );
    let err: unknown;
    try {
      readConfig({ ...base, PAYMENT_PROCESSOR: "stripe", STRIPE_SECRET_KEY: KEY, STRIPE_API_BASE: "api.stripe.com" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/STRIPE_API_BASE must be a URL/);
    expect((err as Error).message).not.toContain(KEY);
    expect(() =>
      readConfig({ ...base, PAYMENT_PROCESSOR: "stripe", STRIPE_SECRET_KEY: KEY, STRIPE_API_BASE: "http://127.0.0.1:12111/" }),
    ).toThrow(new ConfigError('STRIPE_API_BASE must end in /v1, as Stripe\'s does, got "/"'));
  });

  it("closes months every minute unless INVOICE_CLOSE_INTERVAL_MS says otherwise", () => {
    expect(readConfig(base).invoiceCloseIntervalMs).toBe(60_000);
    expect(readConfig({ ...base, INVOICE_CLOSE_INTERVAL_MS: "250" }).invoiceCloseIntervalMs).toBe(250);
    expect(() => readConfig({ ...base, INVOICE_CLOSE_INTERVAL_MS: "0" })).toThrow(/INVOICE_CLOSE_INTERVAL_MS must be a positive/);
    expect(() => readConfig({ ...base, INVOICE_CLOSE_INTERVAL_MS: "1m" })).toThrow(ConfigError);
  });

  it("holds a storage sample's size for at most a minute past it unless STORAGE_SAMPLE_MAX_GAP_MS says otherwise", () => {
    expect(readConfig(base).storageMaxGapMs).toBe(60_000);
    expect(readConfig({ ...base, STORAGE_SAMPLE_MAX_GAP_MS: "120000" }).storageMaxGapMs).toBe(120_000);
    expect(readConfig(base).usageSampleRetentionDays).toBe(40);
    expect(readConfig({ ...base, USAGE_SAMPLE_RETENTION_DAYS: "60" }).usageSampleRetentionDays).toBe(60);
    expect(() => readConfig({ ...base, USAGE_SAMPLE_RETENTION_DAYS: "0" })).toThrow(/USAGE_SAMPLE_RETENTION_DAYS/);
    expect(() => readConfig({ ...base, STORAGE_SAMPLE_MAX_GAP_MS: "0" })).toThrow(/STORAGE_SAMPLE_MAX_GAP_MS must be a positive/);
  });

  it("reads identity's address for alert notices, optional, and checks alerts every minute unless told otherwise", () => {
    expect(readConfig(base)).toMatchObject({ identityUrl: undefined, alertCheckIntervalMs: 60_000 });
    expect(readConfig({ ...base, IDENTITY_URL: "http://127.0.0.1:8081", ALERT_CHECK_INTERVAL_MS: "500" })).toMatchObject({
      identityUrl: "http://127.0.0.1:8081",
      alertCheckIntervalMs: 500,
    });
    expect(() => readConfig({ ...base, IDENTITY_URL: "identity 8081" })).toThrow(/IDENTITY_URL must be a URL/);
    expect(() => readConfig({ ...base, ALERT_CHECK_INTERVAL_MS: "-1" })).toThrow(/ALERT_CHECK_INTERVAL_MS must be a positive/);
  });

  it("builds an identity client only with IDENTITY_URL", async () => {
    const without = createContext(readConfig(base));
    const withUrl = createContext(readConfig({ ...base, IDENTITY_URL: "http://127.0.0.1:8081" }));
    expect(without.identity).toBeUndefined();
    expect(typeof withUrl.identity?.notifyOrganization).toBe("function");
    await without.pool.end();
    await withUrl.pool.end();
  });

  it("builds the processor the config names", async () => {
    for (const [env, name] of [
      [base, "test"],
      [{ ...base, PAYMENT_PROCESSOR: "stripe", STRIPE_SECRET_KEY: KEY }, "stripe"],
    ] as const) {
      const ctx = createContext(readConfig(env));
      expect(ctx.processor.name).toBe(name);
      await ctx.pool.end();
    }
  });

  it("takes overrides as every service's createContext does: a test's clock reaches the test processor", async () => {
    const clock = { now: () => new Date("2031-05-01T00:00:00Z") };
    const log = createLogger("billing-config-test");
    const ctx = createContext(readConfig(base), { clock, log });
    expect(ctx.clock).toBe(clock);
    expect(ctx.log).toBe(log);
    const attached = await ctx.processor.attachCard("cus_x", "tok_visa");
    expect(attached).toMatchObject({ accepted: true, card: { expYear: 2034 } });
    await ctx.pool.end();
  });
});
