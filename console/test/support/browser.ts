/**
 * What the console's browser tests share: Debian's headless Chromium through playwright-core (no
 * downloaded browser), a context that reports CSP violations, exceptions and console errors, and the
 * checks every page gets (axe-core: no serious or critical violation; 375 px wide: no horizontal
 * scroll) with a screenshot into console/screenshots/.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { expect } from "vitest";

export const SCREENSHOTS = join(dirname(fileURLToPath(import.meta.url)), "../../screenshots");
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export async function launchChromium(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}

/** A context at `baseURL` whose pages report into `problems` (exceptions, console errors, CSP violations). */
export async function newContext(browser: Browser, baseURL: string, problems: string[]): Promise<BrowserContext> {
  const ctx = await browser.newContext({ baseURL, viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  // A blocked resource is reported to the page, not always to the console: report it there.
  await ctx.addInitScript(() =>
    addEventListener("securitypolicyviolation", (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`)),
  );
  ctx.on("page", (p) => {
    p.on("pageerror", (err) => problems.push(`exception: ${err.message}`));
    p.on("console", (msg) => {
      // The API's refusals the tests provoke (400, 402, 404 …) are logged by Chromium as failed loads: expected.
      if (msg.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(msg.text())) {
        problems.push(`console: ${msg.text()}`);
      }
    });
  });
  return ctx;
}

/** Signed in as the console signs in: its session in sessionStorage (the login form itself is browser.test.ts's). */
export async function signInWith(page: Page, session: { token: string; email: string; expiresAt: string }): Promise<void> {
  await page.goto("/login");
  await page.evaluate((s) => sessionStorage.setItem("dbaas.session", JSON.stringify(s)), session);
}

/** axe-core on the page as it is: no serious or critical violation. */
export async function expectAccessible(p: Page, what: string): Promise<void> {
  // Evaluated over the DevTools protocol: not an inline script, so the page's CSP still holds for everything else.
  await p.evaluate(AXE);
  const violations = await p.evaluate(async () => {
    const result = await (window as any).axe.run(document, { resultTypes: ["violations"] });
    return result.violations
      .filter((v: any) => v.impact === "serious" || v.impact === "critical")
      .map((v: any) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n: any) => n.target.join(" ")).join(", ")}`);
  });
  expect(violations, `axe on ${what}`).toEqual([]);
}

/** At 375 px wide the page scrolls only vertically. */
export async function expectFitsPhone(p: Page, what: string, shot?: string): Promise<void> {
  const before = p.viewportSize()!;
  await p.setViewportSize({ width: 375, height: 800 });
  await p.waitForTimeout(300);
  const overflow = await p.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  if (shot) await p.screenshot({ path: join(SCREENSHOTS, shot), fullPage: true });
  await p.setViewportSize(before);
  expect(overflow, `horizontal overflow at 375 px on ${what}`).toBeLessThanOrEqual(0);
}

/** Every page the console shows gets the same checks, and a screenshot. */
export async function checkPage(p: Page, what: string, shot: string): Promise<void> {
  await expectAccessible(p, what);
  await expectFitsPhone(p, what);
  await p.screenshot({ path: join(SCREENSHOTS, shot), fullPage: true });
}
