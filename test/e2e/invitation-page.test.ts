/**
 * The invitation page end to end: the real stack (what `npm start` runs) with
 * identity mailing through a real SMTP server process; an owner invites over
 * the API, the link is taken from the mail as it arrived, opened in headless
 * Chromium, the form is filled and sent, and the new member then logs in over
 * the API with the name and password chosen on the page. /docs renders in the
 * same browser.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../support/api.ts";
import { launchBrowser, type Browser } from "../support/browser.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startSmtpServer, type SmtpServer } from "../support/smtp.ts";
import { startStack, type Stack } from "../support/stack.ts";

let meta: TestDatabase;
let smtp: SmtpServer;
let stack: Stack;
let browser: Browser;

beforeAll(async () => {
  smtp = await startSmtpServer();
  meta = await createTestDatabase("e2e_invitation_page");
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1", env: { SMTP_URL: smtp.url } });
  browser = await launchBrowser();
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await stack?.destroy();
  await smtp?.stop();
  await meta?.drop();
});

const shown = (id: string) =>
  `!document.getElementById(${JSON.stringify(id)}).hidden && document.getElementById(${JSON.stringify(id)}).innerText`;

describe("the invitation page", () => {
  // The mail (20 s) and the two pages' answers (15 s each): the test's own timeout covers its waits.
  it("the mailed link opens a page where the invitee joins; the new member then logs in with what they chose", {
    timeout: 20_000 + 2 * 15_000 + 15_000,
  }, async () => {
    const owner = createApi(stack.baseUrl);
    await owner.signup("page-owner");
    const email = `page-invitee-${Date.now()}@example.com`;
    const invited = await owner.post("/v1/organization/members", { email, role: "viewer" });
    expect(invited.status).toBe(201);

    const mail = await smtp.waitForMail((m) => m.to.includes(email));
    const link = /https?:\/\/\S+\/invitations\/accept\?token=\S+/.exec(mail.text)?.[0];
    expect(link, mail.text).toBeDefined();
    // The link points at this stack's gateway (identity's PUBLIC_BASE_URL), not a 404 elsewhere.
    expect(new URL(link!).origin).toBe(stack.baseUrl);

    const page = await browser.newPage();
    await page.goto(link!);
    expect(await page.evaluate("document.title")).toContain("invitation");
    await page.type("#name", "Ada Lovelace");
    await page.type("#password", "analytical-engine-1843");
    await page.click("#join");
    const token = await page.waitFor<string>(shown("token"), "the page's welcome with the token");
    expect(token).toMatch(/^dbs_/);
    expect(await page.evaluate(shown("organization"))).toBe("Test Org");
    expect(await page.evaluate(shown("role"))).toBe("viewer");
    expect(page.problems).toEqual([]);

    // The token the page showed works, and so do the e-mail and password chosen on it.
    const member = createApi(stack.baseUrl);
    member.setToken(token);
    expect((await member.get("/v1/organization")).status).toBe(200);
    const login = await createApi(stack.baseUrl).post("/v1/auth/token", { email, password: "analytical-engine-1843" });
    expect(login.status).toBe(200);
    member.setToken(login.body.data.access_token);
    const members = await member.get("/v1/organization/members");
    expect(members.body.data.members).toContainEqual(
      expect.objectContaining({ role: "viewer", user: expect.objectContaining({ email, name: "Ada Lovelace" }) }),
    );

    // The link is spent: opened again, the page shows the API's refusal.
    const again = await browser.newPage();
    await again.goto(link!);
    await again.type("#password", "analytical-engine-1843");
    await again.click("#join");
    expect(await again.waitFor<string>(shown("error"), "the refusal")).toMatch(/already (been )?(used|accepted)/i);
  });

  it("/docs renders the served OpenAPI document", async () => {
    const page = await browser.newPage();
    await page.goto(`${stack.baseUrl}/docs`);
    await page.waitFor(`!!document.querySelector(".opblock-summary-path[data-path='/v1/databases']")`, "the /v1/databases operation");
    expect(await page.evaluate<string>("document.body.innerText")).toContain("/v1/invitations/accept");
    for (const url of page.requests.filter((u) => !u.startsWith("data:"))) expect(new URL(url).origin, url).toBe(stack.baseUrl);
    expect(page.problems).toEqual([]);
  });
});
