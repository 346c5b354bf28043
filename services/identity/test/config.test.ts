import { ConfigError } from "@dbaas/kit";
import { describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";

const base = { DATABASE_URL: "postgres://x@127.0.0.1/db", INTERNAL_AUTH_SECRET: "s" };

describe("identity config", () => {
  it("defaults: mail printed to the log, links to the local gateway, no databases service", () => {
    const c = readConfig(base);
    expect(c.smtpUrl).toBeUndefined();
    expect(c.publicBaseUrl).toBe("http://127.0.0.1:8080");
    expect(c.databasesUrl).toBeUndefined();
    expect(c.mailFrom).toBe("dbaas <no-reply@dbaas.localhost>");
    expect(c.mailPollMs).toBe(1000);
  });

  it("reads SMTP_URL, PUBLIC_BASE_URL (without a trailing slash) and DATABASES_URL", () => {
    const c = readConfig({
      ...base,
      SMTP_URL: "smtp://user:pw@mail.example.com:2525",
      PUBLIC_BASE_URL: "https://console.example.com/",
      DATABASES_URL: "http://databases:8082",
      MAIL_FROM: "Ops <ops@example.com>",
    });
    expect(c).toMatchObject({
      smtpUrl: "smtp://user:pw@mail.example.com:2525",
      publicBaseUrl: "https://console.example.com",
      databasesUrl: "http://databases:8082",
      mailFrom: "Ops <ops@example.com>",
    });
  });

  it("fails fast on a mail URL that is not SMTP and on URLs that are not URLs", () => {
    expect(() => readConfig({ ...base, SMTP_URL: "http://mail.example.com" })).toThrow(ConfigError);
    expect(() => readConfig({ ...base, PUBLIC_BASE_URL: "not a url" })).toThrow(/PUBLIC_BASE_URL must be a URL/);
    expect(() => readConfig({ ...base, MAIL_POLL_MS: "5" })).toThrow(/MAIL_POLL_MS/);
  });
});
