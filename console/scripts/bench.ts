/**
 * `npm run bench:console`: what the console costs, against a running stack
 * (`npm start`; DBAAS_URL, default http://127.0.0.1:8080) in Debian's headless
 * Chromium (CHROMIUM, default /usr/bin/chromium):
 *  - the JavaScript (and CSS) the first page loads, gzipped as the gateway sends it;
 *  - the databases page's time to interactive: navigation start to its list
 *    (or empty state) rendered and its controls usable, from the performance timeline;
 *  - the requests an idle tab makes per minute, on the databases page, on
 *    a running database's page and on each of its tabs that reads more than
 *    the database itself (the Logs tab also while following new entries) (the free plan allows 60 a minute).
 * Prints a Markdown table for docs/benchmarks.md.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { DbaasClient } from "@dbaas/client";
import { chromium } from "playwright-core";

const base = process.env.DBAAS_URL ?? "http://127.0.0.1:8080";
const dist = join(dirname(fileURLToPath(import.meta.url)), "../dist");
const IDLE_MS = Number(process.env.IDLE_MS ?? 60_000);

function firstPageBytes(): { js: number; css: number; files: string[] } {
  const html = readFileSync(join(dist, "index.html"), "utf8");
  const files = [...html.matchAll(/(?:src|href)="\/(console-assets\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
  let js = 0;
  let css = 0;
  for (const f of files) {
    const size = gzipSync(readFileSync(join(dist, f)), { level: 9 }).length;
    if (f.endsWith(".js")) js += size;
    else css += size;
  }
  return { js, css, files };
}

const email = `bench-${Date.now()}@example.com`;
const password = "bench-password-123";
const api = new DbaasClient({ baseUrl: base });
/**
 * Sign-up hashes a password: on a loaded machine the identity service may miss the gateway's 10 s (504)
 * and still make the account; then log in to it (a 409 on the retry says it exists), else try again.
 */
async function signUp(): Promise<{ access_token: string; expires_at: string }> {
  let exists = false;
  for (let attempt = 1; ; attempt++) {
    try {
      return exists
        ? await api.auth.login({ email, password })
        : await api.auth.signup({ email, password, name: "Bench", organization_name: "Bench" });
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status === 409 && attempt > 1 && !exists) exists = true;
      else if (attempt >= 6 || status !== 504) throw err;
    }
  }
}
const signed = await signUp();
api.setToken(signed.access_token);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const context = await browser.newContext({ baseURL: base });
const page = await context.newPage();
// Logging in hashes a password: on a loaded machine that alone can take tens of seconds.
page.setDefaultTimeout(120_000);
// Signed in as the console signs in (its session in sessionStorage), with the token sign-up returned:
// a second password hash through the login form is not what is measured here.
await page.goto("/login");
await page.evaluate((session) => sessionStorage.setItem("dbaas.session", JSON.stringify(session)), {
  token: signed.access_token,
  email,
  expiresAt: signed.expires_at,
});

// Time to interactive: a fresh load of the databases page (signed in: the token is in sessionStorage).
const tti: number[] = [];
for (let i = 0; i < 5; i++) {
  await page.goto("/databases");
  await page.getByText("No databases yet").waitFor();
  tti.push(await page.evaluate(() => performance.now()));
}
tti.sort((a, b) => a - b);

async function idleRate(path: string, ready: string, then?: () => Promise<void>): Promise<number> {
  await page.goto(path);
  await page.getByText(ready).first().waitFor();
  await then?.();
  let count = 0;
  const onRequest = (r: { url(): string }) => {
    if (new URL(r.url()).pathname.startsWith("/v1/")) count++;
  };
  page.on("request", onRequest);
  await page.waitForTimeout(IDLE_MS);
  page.off("request", onRequest);
  return (count * 60_000) / IDLE_MS;
}

const emptyRate = await idleRate("/databases", "No databases yet");
const db = await api.databases.create({ name: "bench-idle", region: "fsn1", tier: "micro" });
await api.databases.waitForStatus(db.id, "running", { timeoutMs: 300_000, intervalMs: 2_000 });
const listRate = await idleRate("/databases", "bench-idle");
const dbRate = await idleRate(`/databases/${db.id}`, "Connection string");
// The tabs of #21, #22 and #24: what each adds to the database's own read every 30 s.
const tabRates: Array<[string, number]> = [];
for (const [path, ready] of [
  ["high-availability", "Last failover"],
  ["network", "Connection pooler"],
  ["roles", "Databases on this server"],
  ["configuration", "work_mem"],
  ["extensions", "Available"],
  ["logs", "Follow new entries"],
  ["queries", "Counting since"],
] as const) {
  tabRates.push([path, await idleRate(`/databases/${db.id}/${path}`, ready)]);
}
// The Logs tab while following: every 3 s from next_cursor, as long as the box is ticked.
tabRates.push([
  "logs (following)",
  await idleRate(`/databases/${db.id}/logs`, "Follow new entries", () => page.getByLabel(/Follow new entries/).check()),
]);
await browser.close();
await api.databases.delete(db.id);

const bytes = firstPageBytes();
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
console.log(`| measure | value |
| --- | --- |
| first page's JavaScript, gzipped (${bytes.files.filter((f) => f.endsWith(".js")).join(", ")}) | ${kb(bytes.js)} (target ≤ 150 KB) |
| first page's CSS, gzipped | ${kb(bytes.css)} |
| databases page, time to interactive (5 loads: median, max) | ${tti[2]!.toFixed(0)} ms, ${tti[4]!.toFixed(0)} ms |
| idle requests per minute: databases page, empty | ${emptyRate.toFixed(1)} |
| idle requests per minute: databases page, one running database | ${listRate.toFixed(1)} |
| idle requests per minute: a running database's page | ${dbRate.toFixed(1)} |
${tabRates.map(([path, rate]) => `| idle requests per minute: its ${path} tab | ${rate.toFixed(1)} |`).join("\n")}`);
