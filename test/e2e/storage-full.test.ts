/**
 * Issue 20: storage per tier, end to end. The stack's catalogue is shrunk (TEST_STORAGE_BYTES_PER_GB: one
 * catalogue GB stands for 15 MB, so micro's 10 GB are 150 MB and small's 40 GB 600 MB); a micro database is
 * written to until it is full: writes then fail with 25006 (read-only), the operation `storage_full` is listed,
 * the owner gets a mail, and a session may still opt back into writes to delete data. A resize to small makes it
 * writable again, with `storage_ok` and a second mail.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, poll, waitRunning } from "../support/backups.ts";
import { createApi } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { connectCustomer } from "../support/pgclient.ts";
import { startSmtpServer, type SmtpServer } from "../support/smtp.ts";
import { startStack, type Stack } from "../support/stack.ts";

const run = promisify(execFile);

let stack: Stack;
let meta: TestDatabase;
let smtp: SmtpServer;

beforeAll(async () => {
  smtp = await startSmtpServer();
  meta = await createTestDatabase("e2e_storage");
  stack = await startStack({
    databaseUrl: meta.url,
    env: { SMTP_URL: smtp.url, TEST_STORAGE_BYTES_PER_GB: "15000000", AGENT_SAMPLE_INTERVAL_MS: "1000" },
  });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await smtp?.stop();
  await meta?.drop();
});

/** The SQLSTATE a statement fails with, or undefined. */
const sqlState = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: { code?: string; message: string }) => e.code ?? e.message,
  );

describe("storage per tier", { timeout: 300_000 }, () => {
  let api: Api;
  let email: string;
  let db: { id: string; name: string; connection_string: string };

  const operations = async (type: string) =>
    ((await api.get(`/v1/databases/${db.id}/operations?per_page=100`)).body.data.operations as { type: string; status: string }[]).filter(
      (o) => o.type === type,
    );

  it("a database written full turns read-only: 25006, operation storage_full, a mail to its owner; a session may still delete", async () => {
    api = createApi(stack.baseUrl);
    const signedUp = await api.signup("storage");
    email = signedUp.email;
    // Resizing needs a plan with a payment method in good standing.
    await run(process.execPath, ["--import", "tsx", "services/identity/src/cli/set-plan.ts", signedUp.organization.id, "internal"], {
      cwd: stack.root,
      env: { ...process.env, IDENTITY_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 1}`, DBAAS_DATA_DIR: stack.dataDir },
    });
    api.setToken((await api.post("/v1/auth/token", { email, password: signedUp.password })).body.data.access_token);
    await api.addPaymentMethod();
    const created = await api.post("/v1/databases", { name: "filling", region: "fsn1", tier: "micro" });
    expect(created.status).toBe(201);
    db = created.body.data;
    await waitRunning(api, db.id);

    const c = await connectCustomer(db.connection_string);
    c.on("error", () => {});
    try {
      await c.query("CREATE TABLE fill (id int, v text)");
      // About 20 MB of rows (under 2 kB each: stored as they are, not compressed) and as much WAL per round.
      let state: string | undefined;
      for (let round = 0; round < 60 && state === undefined; round++) {
        state = await sqlState(c.query(`INSERT INTO fill SELECT g, repeat(md5(g::text), 30) FROM generate_series(1, 20000) g`));
        if (state === undefined) await new Promise((r) => setTimeout(r, 500));
      }
      expect(state).toBe("25006");
      expect(await operations("storage_full")).toEqual([expect.objectContaining({ status: "succeeded" })]);
      const mail = await smtp.waitForMail((m) => m.to.includes(email) && /filling is full/.test(m.subject), 60_000);
      expect(mail.text).toMatch(/read-only/);
      expect(mail.text).toMatch(/SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE/);
      // New sessions are read-only too; one that opts back in may delete.
      const other = await connectCustomer(db.connection_string);
      try {
        expect(await sqlState(other.query("INSERT INTO fill VALUES (0, 'x')"))).toBe("25006");
        await other.query("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE");
        expect((await other.query("DELETE FROM fill WHERE id = 1")).rowCount).toBeGreaterThan(0);
      } finally {
        await other.end();
      }
    } finally {
      await c.end().catch(() => {});
    }
  });

  it("a resize to a larger tier makes it writable again: operation storage_ok and a mail", async () => {
    const resized = await api.post(`/v1/databases/${db.id}/resize`, { tier: "small" });
    expect(resized.status).toBe(200);
    await waitRunning(api, db.id);
    await poll(async () => (await operations("storage_ok")).length === 1, 60_000, "operation storage_ok");
    const c = await connectCustomer(db.connection_string);
    try {
      // The agent applies it right after the spec says so; a sample every second brings it.
      await poll(async () => (await sqlState(c.query("INSERT INTO fill VALUES (-1, 'after')"))) === undefined, 30_000, "writable again");
    } finally {
      await c.end();
    }
    await smtp.waitForMail((m) => m.to.includes(email) && /filling is writable again/.test(m.subject), 60_000);
  });
});
