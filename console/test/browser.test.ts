/**
 * The console in real headless Chromium (Debian's `chromium`, driven by
 * playwright-core; no downloaded browser) against the real local stack (what
 * `npm start` runs, one agent) with identity mailing through a real SMTP
 * server process: a person signs up, creates a database, uses its password
 * (shown once) with `pg`, sees it running without reloading, backs it up,
 * restores it to a point in time, stops and starts it, reads its metrics,
 * deletes it by typing its name; lists and removes a trusted source, toggles
 * and resizes its pooler; invites a member who joins through the real
 * mail link; makes an API key and uses it; adds a card after a 402, sets an
 * alert; opens last month's invoice as a PDF. Every page is checked with axe-core (no serious or critical
 * violation), at 375 px wide (no horizontal scroll), for Content-Security-Policy
 * violations, and photographed into console/screenshots/.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createInternalClient, operatorSecret } from "@dbaas/kit";
import { BillingService } from "@dbaas/proto/billing";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { query } from "../../test/support/pgclient.ts";
import { createTestDatabase, type TestDatabase } from "../../test/support/pg.ts";
import { startSmtpServer, type SmtpServer } from "../../test/support/smtp.ts";
import { startStack, type Stack } from "../../test/support/stack.ts";
import { checkPage, expectFitsPhone, launchChromium, newContext as contextFor, SCREENSHOTS } from "./support/browser.ts";

const PASSWORD = "correct-horse-battery-9";

let meta: TestDatabase;
let smtp: SmtpServer;
let stack: Stack;
let browser: Browser;
let context: BrowserContext;
let page: Page;
/** Console errors and uncaught exceptions of every page, CSP violations included. */
const problems: string[] = [];
const email = `console-${Date.now()}@example.com`;

beforeAll(async () => {
  smtp = await startSmtpServer();
  meta = await createTestDatabase("e2e_console");
  // The invoice closer looks every half second: last month's usage recorded below is invoiced at once.
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1", env: { SMTP_URL: smtp.url, INVOICE_CLOSE_INTERVAL_MS: "500" } });
  browser = await launchChromium();
  context = await newContext();
  page = await context.newPage();
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await stack?.destroy();
  await smtp?.stop();
  await meta?.drop();
});

/** A context whose pages report exceptions, console errors and CSP violations into `problems` (support/browser.ts). */
const newContext = (): Promise<BrowserContext> => contextFor(browser, stack.baseUrl, problems);

const statusOf = (p: Page, name: string) => p.locator("tr", { has: p.getByRole("link", { name, exact: true }) }).locator(".status");
const badge = (p: Page) => p.locator(".title-row .status").first();

let dbPassword = "";
let dbConnection = "";
let dbPath = "";

// Each step waits on real services (password hashing, servers starting) on a machine shared with other test files.
describe("the console, in Chromium, against the real stack", { timeout: 180_000 }, () => {
  it("is served at / with the pages' CSP; the API and /docs stay where they were", async () => {
    const res = await fetch(`${stack.baseUrl}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self';");
    expect(res.headers.get("content-security-policy")).not.toContain("unsafe-inline");
    expect((await fetch(`${stack.baseUrl}/v1/databases`)).status).toBe(401);
    expect((await fetch(`${stack.baseUrl}/docs`)).status).toBe(200);
  });

  it("sign-up shows the API's validation errors beside their fields, then signs up", async () => {
    await page.goto("/");
    await page.waitForURL("**/login");
    await checkPage(page, "login", "login.png");
    await page.getByRole("link", { name: "Create an account" }).click();
    await page.getByLabel("Your name").fill("Grace Hopper");
    await page.getByLabel("E-mail").fill("not-an-address");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByLabel("Organization name").fill("Navy Labs");
    await page.getByRole("button", { name: "Create account" }).click();
    const error = page.locator("#email-error");
    await error.waitFor();
    expect(await error.textContent()).toMatch(/e-?mail/i);
    expect(await page.getByLabel("E-mail").getAttribute("aria-invalid")).toBe("true");
    await checkPage(page, "sign-up with errors", "signup-errors.png");
    await page.getByLabel("E-mail").fill(email);
    await page.getByRole("button", { name: "Create account" }).click();
    await page.waitForURL("**/databases");
    await page.getByText("No databases yet").waitFor();
    // The token is in this tab's memory and sessionStorage, never in localStorage or an address.
    const stored = await page.evaluate(() => ({
      local: JSON.stringify({ ...localStorage }),
      session: sessionStorage.getItem("dbaas.session") ?? "",
    }));
    expect(stored.session).toMatch(/dbs_/);
    expect(stored.local).not.toMatch(/dbs_/);
    await checkPage(page, "databases (empty)", "databases-empty.png");
  });

  it("logs out, and logs in again with the keyboard only", async () => {
    await page.getByRole("button", { name: "Log out" }).click();
    await page.waitForURL("**/login");
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("email");
    await page.keyboard.type(email);
    await page.keyboard.press("Tab");
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press("Enter");
    await page.waitForURL("**/databases");
    expect(page.url()).not.toMatch(/dbs_|token/);
  });

  it("creates a database: tiers with prices, the password shown once and working, running without a reload", {
    timeout: 180_000,
  }, async () => {
    const started = page.url();
    await page.getByRole("button", { name: "New database" }).click();
    expect(await page.getByText(/micro — .*\$[\d.]+\/h/).count()).toBe(1);
    await page.getByLabel("Name", { exact: true }).fill("orders");
    await page.getByRole("button", { name: "Create database" }).click();
    const secret = page.getByTestId("secret");
    await secret.waitFor();
    dbPassword = (await secret.textContent())!;
    dbConnection = (await page.getByTestId("connection-string").textContent())!;
    expect(dbConnection).toContain(dbPassword);
    await page.screenshot({ path: join(SCREENSHOTS, "database-created-password-once.png"), fullPage: true });
    // Running, seen by the page's own polling: no reload, the same document.
    await expect.poll(() => statusOf(page, "orders").textContent(), { timeout: 150_000, interval: 500 }).toBe("running");
    expect(page.url()).toBe(started);
    expect(await page.evaluate(() => performance.getEntriesByType("navigation").length)).toBe(1);
    await query(dbConnection, "create table t (id int); insert into t values (42)");
    expect(await query(dbConnection, "select id from t")).toEqual([{ id: 42 }]);
    await expectFitsPhone(page, "databases", "databases-375px.png");
    // Dismissed, the password is gone for good: the database's page shows it masked.
    await page.getByRole("button", { name: "I have saved it" }).click();
    expect(await page.getByTestId("secret").count()).toBe(0);
    await page.getByRole("link", { name: "orders", exact: true }).click();
    await page.waitForURL(/\/databases\/db-/);
    dbPath = new URL(page.url()).pathname;
    await page.getByText("Connection string", { exact: true }).waitFor();
    expect(await page.locator("main").textContent()).not.toContain(dbPassword);
    await page.getByRole("button", { name: "Show the CA certificate" }).click();
    expect(await page.getByTestId("ca-certificate").textContent()).toContain("BEGIN CERTIFICATE");
    await checkPage(page, "database overview", "database-overview.png");
  });

  it("network: trusted sources added (a bad CIDR's 422 beside the field), listed and removed; the pooler toggled and resized", {
    timeout: 180_000,
  }, async () => {
    await page.getByRole("link", { name: "Network" }).click();
    await page.getByTestId("trusted-empty").waitFor();
    expect(await page.getByTestId("trusted-empty").textContent()).toMatch(/every address can connect/);
    // Host bits set: the API's 422 names the network meant, beside the address field.
    await page.getByLabel("Address or network (CIDR)").fill("10.1.2.3/8");
    await page.getByRole("button", { name: "Add trusted source" }).click();
    await page.locator("#ts-cidr-error").waitFor();
    expect(await page.locator("#ts-cidr-error").textContent()).toContain("10.0.0.0/8");
    expect(await page.getByLabel("Address or network (CIDR)").getAttribute("aria-invalid")).toBe("true");
    // This machine (the test's own connections come from it), for a day.
    const tomorrow = new Date(Date.now() + 86_400_000);
    const local = new Date(tomorrow.getTime() - tomorrow.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    await page.getByLabel("Address or network (CIDR)").fill("127.0.0.0/8");
    await page.getByLabel("Description (optional)").fill("this machine");
    await page.getByLabel("Expires (your time zone, optional)").fill(local);
    await page.getByRole("button", { name: "Add trusted source" }).click();
    const row = page.locator("tbody tr", { hasText: "127.0.0.0/8" });
    await row.waitFor();
    expect(await row.textContent()).toContain("this machine");
    expect(await row.textContent()).toContain("IPv4 network, 16,777,216 addresses");
    // Sent as the picked second in UTC; shown in the browser's time zone with UTC on hover.
    const utc = `${new Date(Math.floor(tomorrow.getTime() / 1000) * 1000).toISOString().replace("T", " ").slice(0, 19)} UTC`;
    expect(await row.locator("time").getAttribute("title")).toBe(utc);
    expect(await page.locator("#ts-cidr-error").count()).toBe(0);
    // Listed, still admitted: the database answers from this machine.
    expect(await query(dbConnection, "select id from t")).toEqual([{ id: 42 }]);

    // The pooler: running, at the host and port the page shows (the password is the database's).
    const poolerCode = page.locator("dt", { hasText: "Pooler connection string" }).locator("xpath=..").locator("code");
    await poolerCode.waitFor();
    const poolerPort = new URL((await poolerCode.textContent())!).port;
    const direct = new URL(dbConnection);
    const throughPooler = dbConnection.replace(`:${direct.port}/`, `:${poolerPort}/`);
    expect(throughPooler).not.toBe(dbConnection);
    await expect
      .poll(async () => await query(throughPooler, "select id from t").catch((e: Error) => e.message), { timeout: 60_000, interval: 1_000 })
      .toEqual([{ id: 42 }]);
    const poolerBadge = page.locator("section", { has: page.getByRole("heading", { name: "Connection pooler" }) }).locator(".status");
    expect(await poolerBadge.textContent()).toBe("enabled");
    await page.getByRole("button", { name: "Disable the pooler" }).click();
    await page.getByRole("button", { name: "Enable the pooler" }).waitFor();
    expect(await poolerBadge.textContent()).toBe("disabled");
    await page.getByRole("button", { name: "Enable the pooler" }).click();
    await page.getByRole("button", { name: "Disable the pooler" }).waitFor();
    expect(await poolerBadge.textContent()).toBe("enabled");
    // Beyond the tier: the API's bound, beside the field.
    await page.getByLabel("Pool size (server connections)").fill("5000");
    await page.getByRole("button", { name: "Save pooler settings" }).click();
    await page.locator("#pooler-size-error").waitFor();
    expect(await page.locator("#pooler-size-error").textContent()).toMatch(/between 1 and \d+/);
    await checkPage(page, "network (an entry, a 422)", "network.png");
    await page.getByLabel("Pool size (server connections)").fill("7");
    await page.getByLabel("Pool mode").selectOption("session");
    await page.getByRole("button", { name: "Save pooler settings" }).click();
    await expect.poll(() => page.getByTestId("pooler-applied").textContent()).toBe("In effect: session mode, pool size 7.");
    expect(await page.locator("#pooler-size-error").count()).toBe(0);

    // Removed after a confirmation saying the list becomes empty.
    await page.getByRole("button", { name: "Remove 127.0.0.0/8" }).click();
    await page.getByText(/only trusted source: once it is removed the list is empty/).waitFor();
    await page.getByRole("button", { name: "Confirm removing 127.0.0.0/8" }).click();
    await page.getByTestId("trusted-empty").waitFor();
    await page.getByRole("link", { name: "Overview" }).click();
  });

  it("takes a backup, lists it, and restores to a point in time picked within the window", { timeout: 240_000 }, async () => {
    await page.getByRole("link", { name: "Backups" }).click();
    await page.getByText("WAL archiving:").waitFor();
    await checkPage(page, "backups", "backups-before.png");
    const manual = page.locator("tbody tr", { hasText: "manual" });
    expect(await manual.count()).toBe(0);
    await page.getByRole("button", { name: "Back up now" }).click();
    // Listed at once as running, then completed: the page follows it without a reload.
    await expect.poll(() => manual.locator(".status").textContent(), { timeout: 150_000, interval: 500 }).toBe("completed");
    const picker = page.getByLabel("Restore to (your time zone)");
    await picker.waitFor({ timeout: 60_000 });
    const [min, max, value] = await Promise.all([picker.getAttribute("min"), picker.getAttribute("max"), picker.inputValue()]);
    expect(min! <= value && value <= max!).toBe(true);
    await page.getByLabel("Name of the new database").fill("orders-restored");
    await page.getByRole("button", { name: "Restore" }).click();
    const secret = page.getByTestId("secret");
    await page.locator("[data-testid=secret], .banner.error").first().waitFor({ timeout: 90_000 });
    expect(await page.locator(".banner.error").allTextContents()).toEqual([]);
    const password = (await secret.textContent())!;
    await checkPage(page, "backups with a restore", "backups.png");
    await page.getByRole("link", { name: "Open orders-restored" }).click();
    await expect.poll(() => badge(page).textContent(), { timeout: 180_000, interval: 500 }).toBe("running");
    const conn = (await page.locator("dd code").last().textContent())!.replace("********", encodeURIComponent(password));
    expect(await query(conn, "select id from t")).toEqual([{ id: 42 }]);
    await page.goto(dbPath);
  });

  it("stops and starts the database, its status following without a reload", { timeout: 240_000 }, async () => {
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await expect.poll(() => badge(page).textContent(), { timeout: 120_000, interval: 500 }).toBe("stopped");
    await page.getByRole("button", { name: "Start", exact: true }).click();
    await expect.poll(() => badge(page).textContent(), { timeout: 120_000, interval: 500 }).toBe("running");
    await page.getByRole("link", { name: "Operations" }).click();
    await page.getByRole("cell", { name: "stop" }).waitFor();
    await checkPage(page, "operations", "operations.png");
  });

  it("charts the metrics over a selectable range", { timeout: 180_000 }, async () => {
    await page.getByRole("link", { name: "Metrics" }).click();
    // The first points come a minute after start; choosing a range reads again.
    await expect
      .poll(
        async () => {
          const count = await page.locator(".chart canvas").count();
          if (count === 0)
            await page.getByLabel("Range").selectOption((await page.getByLabel("Range").inputValue()) === "1h" ? "6h" : "1h");
          return count;
        },
        { timeout: 150_000, interval: 5_000 },
      )
      .toBeGreaterThan(0);
    await page.waitForTimeout(500);
    await checkPage(page, "metrics", "metrics.png");
  });

  it("deletes the database only once its name is typed", async () => {
    await page.getByRole("link", { name: "Settings" }).click();
    const del = page.getByRole("button", { name: "Delete database" });
    expect(await del.isDisabled()).toBe(true);
    await page.getByLabel("Type orders to delete database").fill("order");
    expect(await del.isDisabled()).toBe(true);
    await checkPage(page, "settings", "settings.png");
    await page.getByLabel("Type orders to delete database").fill("orders");
    await del.click();
    await page.waitForURL("**/databases");
    await expect.poll(async () => await page.getByRole("link", { name: "orders", exact: true }).count(), { timeout: 30_000 }).toBe(0);
  });

  it("a 402 leads to adding a card; billing shows the usage chart and takes an alert", async () => {
    await page.getByRole("button", { name: "New database" }).click();
    await page.getByLabel("Name", { exact: true }).fill("analytics");
    await page.getByLabel(/^small/).check();
    await page.getByRole("button", { name: "Create database" }).click();
    await page.getByRole("link", { name: "Add a card on the billing page" }).click();
    await page.waitForURL("**/billing#payment-methods");
    await page.getByText("No card yet").waitFor();
    await page.getByLabel("Card token").fill("tok_visa");
    await page.getByRole("button", { name: "Add card" }).click();
    await page.getByText(/ending \d{4}.*\(default\)/).waitFor();
    await page.locator(".chart canvas").waitFor();
    expect(await page.getByTestId("usage-total").textContent()).toMatch(/\$\d/);
    await page.getByLabel("Threshold (USD)").fill("-5");
    await page.getByRole("button", { name: "Add alert" }).click();
    await page.locator("#alert-threshold-error").waitFor();
    await page.getByLabel("Threshold (USD)").fill("25");
    await page.getByRole("button", { name: "Add alert" }).click();
    await page.getByText(/At \$25\.00 by email/).waitFor();
    await checkPage(page, "billing", "billing.png");
  });

  it("opens an invoice's PDF: the API answers application/pdf to the signed-in member, with the token in no URL", async () => {
    // Usage in last month (ended, so billed), recorded at billing as the databases outbox would have: 10 micro hours.
    const session = JSON.parse((await page.evaluate(() => sessionStorage.getItem("dbaas.session")))!) as { token: string };
    const org = await (await fetch(`${stack.baseUrl}/v1/organization`, { headers: { authorization: `Bearer ${session.token}` } })).json();
    const now = new Date();
    const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
    const period = lastMonth.toISOString().slice(0, 7);
    const at = (hours: number) => timestampFromDate(new Date(lastMonth.getTime() + hours * 3_600_000));
    const billing = createInternalClient(BillingService, `http://127.0.0.1:${Number(stack.env.PORT) + 3}`, {
      secret: operatorSecret({ ...process.env, DBAAS_DATA_DIR: stack.dataDir }),
      caller: "support",
    });
    const base = { organizationId: org.data.id, databaseId: `db-console-invoice-${org.data.id}`, tier: "micro" };
    await billing.recordStatusEvents({
      events: [
        { ...base, eventId: `${base.databaseId}-up`, status: "running", occurredAt: at(24) },
        { ...base, eventId: `${base.databaseId}-down`, status: "stopped", occurredAt: at(34) },
      ],
    });
    // The invoices are read when the page opens: read again until the closer has issued it.
    const button = page.getByRole("button", { name: `PDF of ${period}` });
    await expect
      .poll(
        async () => {
          await page.goto("/billing");
          await page.getByRole("heading", { name: "Invoices" }).waitFor();
          return await button.isVisible({ timeout: 2_000 }).catch(() => false);
        },
        { timeout: 60_000, interval: 1_000 },
      )
      .toBe(true);
    const [response, download] = await Promise.all([
      page.waitForResponse((r) => /\/v1\/billing\/invoices\/[^/]+\/pdf$/.test(r.url())),
      page.waitForEvent("download"),
      button.click(),
    ]);
    expect(response.status()).toBe(200);
    expect(response.headers()["content-type"]).toMatch(/^application\/pdf/);
    expect(response.url()).not.toContain(session.token);
    expect(await response.request().headerValue("authorization")).toBe(`Bearer ${session.token}`);
    expect(download.suggestedFilename()).toBe(`invoice-${period}.pdf`);
    const pdf = readFileSync((await download.path())!);
    expect(pdf.subarray(0, 5).toString("latin1")).toBe("%PDF-");
    expect(pdf.length).toBeGreaterThan(500);
    await checkPage(page, "billing with an invoice", "billing-invoice.png");
  });

  it("makes an API key whose secret is shown once and works", async () => {
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByText("No API keys").waitFor();
    await page.getByLabel("What the key is for").fill("ci");
    await page.getByRole("button", { name: "Create API key" }).click();
    const secret = (await page.getByTestId("secret").textContent())!;
    expect(secret).toMatch(/^dbk_/);
    const res = await fetch(`${stack.baseUrl}/v1/databases`, { headers: { authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(200);
    await page.getByRole("button", { name: "I have saved it" }).click();
    await page.reload();
    await page.getByRole("button", { name: "Revoke ci" }).waitFor();
    expect(await page.locator("main").textContent()).not.toContain(secret);
    await checkPage(page, "API keys", "api-keys.png");
  });

  it("invites a member who joins through the mail's link, then changes their role and removes them", { timeout: 120_000 }, async () => {
    const invitee = `invitee-${Date.now()}@example.com`;
    await page.getByRole("link", { name: "Members" }).click();
    await page.getByText("No pending invitations").waitFor();
    await page.getByLabel("E-mail").fill(invitee);
    await page.getByRole("button", { name: "Send invitation" }).click();
    await page.getByText(new RegExp(`${invitee} · developer · pending`)).waitFor();
    const mail = await smtp.waitForMail((m) => m.to.includes(invitee), 30_000);
    const link = /https?:\/\/\S+\/invitations\/accept\?token=\S+/.exec(mail.text)![0];

    const other = await newContext();
    const joining = await other.newPage();
    await joining.goto(link);
    await joining.fill("#name", "Katherine Johnson");
    await joining.fill("#password", PASSWORD);
    await joining.click("#join");
    await joining.locator("#token").waitFor({ state: "visible" });
    // The new member logs in to the console with what they chose, and sees the organization's databases.
    await joining.goto("/login");
    await joining.getByLabel("E-mail").fill(invitee);
    await joining.getByLabel("Password").fill(PASSWORD);
    await joining.getByRole("button", { name: "Log in" }).click();
    await joining.waitForURL("**/databases");
    await joining.getByText("Navy Labs").waitFor();
    await other.close();

    await page.reload();
    await page.getByText("No pending invitations").waitFor();
    await page.getByLabel(`Role of ${invitee}`).selectOption("viewer");
    await expect.poll(async () => await page.getByLabel(`Role of ${invitee}`).inputValue()).toBe("viewer");
    await checkPage(page, "members", "members.png");
    await page.getByRole("button", { name: `Remove ${invitee}` }).click();
    await page.getByLabel(`Type ${invitee} to remove member`).fill(invitee);
    await page.getByRole("button", { name: "Remove member" }).click();
    await expect.poll(async () => await page.locator(`[data-email="${invitee}"]`).count(), { timeout: 15_000 }).toBe(0);
  });

  it("showed no exception, no console error and no CSP violation on any page", () => {
    expect(problems).toEqual([]);
  });
});
