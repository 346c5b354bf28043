/**
 * Issue 15: the `dbaas` commands test/sdks/node.test.ts does not run, each
 * against the real stack, in tables and with `--output json`: databases
 * stop/start/restart/resize --wait, reset-password (psql with the new
 * password), operations, ca-certificate; backups create --wait and list;
 * restore --wait; databases ha and failover (their refusals on one host: the switchover itself runs on
 * three hosts in test/e2e/high-availability.test.ts); members (an invitation mailed over SMTP, accepted, its
 * member's role changed and removed); api-keys list/revoke; billing usage,
 * invoices, payment methods and alerts.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DbaasClient } from "../../sdks/node/src/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { invitationToken, type SmtpServer, startSmtpServer } from "../support/smtp.ts";
import { type Stack, startStack } from "../support/stack.ts";

const root = resolve(import.meta.dirname, "../..");
const DBAAS = join(root, "node_modules/.bin/dbaas");
const PASSWORD = "a-long-password";

let stack: Stack;
let meta: TestDatabase;
let smtp: SmtpServer;
let home: string;

beforeAll(async () => {
  [meta, smtp, home] = await Promise.all([
    createTestDatabase("e2e_sdk_cli"),
    startSmtpServer(),
    mkdtemp(join(tmpdir(), "dbaas-cli-commands-")),
  ]);
  // A 5 s archive_timeout and a 1 s scheduler pass: a backup completes, and the restore window reaches now, in seconds.
  // Host names under .invalid (RFC 2606), which never resolve: `databases psql` needs --hostaddr.
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    env: { SMTP_URL: smtp.url, BACKUP_SCHEDULE_INTERVAL_MS: "1000", BACKUP_ARCHIVE_TIMEOUT_S: "5", DATABASE_DOMAIN: "db.invalid" },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await Promise.all([meta?.drop(), smtp?.stop(), home && rm(home, { recursive: true, force: true })]);
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function dbaas(args: string[], extra: Record<string, string> = {}): Promise<Run> {
  const { DBAAS_TOKEN: _t, DBAAS_URL: _u, DBAAS_PASSWORD: _p, XDG_CONFIG_HOME: _x, ...env } = process.env;
  return new Promise((done) => {
    execFile(DBAAS, args, { env: { ...env, HOME: home, DBAAS_URL: stack.baseUrl, ...extra }, timeout: 300_000 }, (err, stdout, stderr) => {
      done({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** Runs a command that must succeed with `-o json` and returns what it printed, parsed. */
async function json<T = Record<string, unknown>>(args: string[], extra?: Record<string, string>): Promise<T> {
  const r = await dbaas([...args, "-o", "json"], extra);
  expect(r.code, `dbaas ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return JSON.parse(r.stdout) as T;
}

const email = (what: string) => `${what}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;

describe("dbaas commands on the real stack", () => {
  it("databases: stop, start, restart, resize with --wait; reset-password; operations; ca-certificate", { timeout: 300_000 }, async () => {
    expect(
      (await dbaas(["auth", "signup", "--email", email("life"), "--name", "L", "--organization", "Life"], { DBAAS_PASSWORD: PASSWORD }))
        .code,
    ).toBe(0);
    const db = await json<{ id: string; password: string; username: string }>([
      "databases",
      "create",
      "--name",
      "life",
      "--region",
      "fsn1",
      "--tier",
      "micro",
      "--wait",
    ]);

    const stopped = await dbaas(["databases", "stop", db.id, "--wait", "-o", "json"]);
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(JSON.parse(stopped.stdout)).toMatchObject({ id: db.id, status: "stopped" });
    expect(stopped.stderr).toContain(`${db.id} is stopped\n`);
    expect(await json(["databases", "start", db.id, "--wait"])).toMatchObject({ id: db.id, status: "running" });
    expect(await json(["databases", "restart", db.id, "--wait"])).toMatchObject({ id: db.id, status: "running" });
    // The table form: the database as the wait left it.
    // A tier above micro needs a payment method.
    expect(await json(["billing", "add-payment-method", "--token", "tok_amex"])).toMatchObject({ brand: "amex", default: true });
    const resize = await dbaas(["databases", "resize", db.id, "--tier", "small", "--wait"]);
    expect(resize.code, resize.stderr).toBe(0);
    expect(resize.stdout).toMatch(/^tier:\s+small$/m);
    expect(resize.stdout).toMatch(/^status:\s+running$/m);
    expect(await json(["databases", "get", db.id])).toMatchObject({ tier: "small", status: "running" });

    const reset = await json<{ password: string }>(["databases", "reset-password", db.id]);
    expect(reset.password).not.toBe(db.password);
    const at = ["--hostaddr", "127.0.0.1"];
    const psql = await dbaas(["databases", "psql", db.id, ...at, "--password", reset.password, "--", "-XAtc", "SELECT 2"]);
    expect(psql).toMatchObject({ code: 0, stdout: "2\n" });
    expect((await dbaas(["databases", "psql", db.id, ...at, "--password", db.password, "--", "-XAtc", "SELECT 2"])).code).toBe(2);
    // A host name that resolves nowhere and is no *.localhost: psql's own failure, after a hint.
    const nowhere = await dbaas(["databases", "psql", db.id, "--password", reset.password, "--", "-XAtc", "SELECT 2"]);
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toContain(`${db.id}.db.invalid does not resolve here: pass --hostaddr ADDRESS`);
    expect(nowhere.stderr).toMatch(/could not translate host name/);

    const ops = await json<{ type: string; status: string }[]>(["databases", "operations", db.id]);
    expect(ops.map((o) => o.type)).toEqual(expect.arrayContaining(["create", "stop", "start", "restart", "resize"]));
    const opsTable = await dbaas(["databases", "operations", db.id]);
    expect(opsTable.stdout.split("\n")[0]).toMatch(/^ID\s+TYPE\s+STATUS\s+STARTED\s+FINISHED\s+MEMBERS$/);

    const pem = await dbaas(["databases", "ca-certificate", db.id]);
    expect(pem.stdout).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/);
    expect(await json(["databases", "ca-certificate", db.id])).toEqual({ id: db.id, ca_certificate: pem.stdout });

    // High availability: one host here, so the standbys are refused naming why; nothing to switch over to.
    expect(await json(["databases", "ha", db.id])).toMatchObject({
      standbys: 0,
      synchronous: false,
      members: [{ role: "primary", status: "running", region: "fsn1", lag_bytes: 0 }],
      last_failover: null,
    });
    const haTable = await dbaas(["databases", "ha", db.id]);
    expect(haTable.stdout).toMatch(
      /^standbys: 0, synchronous: false\nlast failover: none\n\nID\s+ROLE\s+STATUS\s+REGION\s+LAG_BYTES\nnode-\S+\s+primary\s+running\s+fsn1\s+0\n$/,
    );
    const refused = await dbaas(["databases", "ha", db.id, "--standbys", "1", "--synchronous"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("region fsn1 has 0 hosts besides the primary's that can take a standby now");
    const noStandby = await dbaas(["databases", "failover", db.id]);
    expect(noStandby.code).not.toBe(0);
    expect(noStandby.stderr).toContain("the database has no standbys to fail over to");

    expect(await json(["databases", "delete", db.id])).toEqual({ id: db.id, deleted: true });
  });

  it("databases trusted-sources list/add/remove and databases pooler get/update", { timeout: 300_000 }, async () => {
    expect(
      (await dbaas(["auth", "signup", "--email", email("edge"), "--name", "E", "--organization", "Edge"], { DBAAS_PASSWORD: PASSWORD }))
        .code,
    ).toBe(0);
    const db = await json<{ id: string }>(["databases", "create", "--name", "edge", "--region", "fsn1", "--tier", "micro", "--wait"]);
    const help = await dbaas(["databases", "trusted-sources", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^\s+add\s+Admit an IPv4 or IPv6 address/m);
    const bad = await dbaas(["databases", "trusted-sources", "add", db.id, "10.1.2.3/8"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("cidr:");
    expect(bad.stderr).toContain("did you mean 10.0.0.0/8");
    const added = await json<{ id: string; cidr: string; description: string }>([
      "databases",
      "trusted-sources",
      "add",
      db.id,
      "203.0.113.7",
      "--description",
      "office",
    ]);
    expect(added).toMatchObject({ cidr: "203.0.113.7/32", description: "office" });
    expect((await json<{ id: string }[]>(["databases", "trusted-sources", "list", db.id])).map((t) => t.id)).toEqual([added.id]);
    const table = await dbaas(["databases", "trusted-sources", "list", db.id]);
    expect(table.stdout.split("\n")[0]).toMatch(/^ID\s+CIDR\s+DESCRIPTION\s+EXPIRES\s+CREATED$/);
    expect(await json(["databases", "trusted-sources", "remove", db.id, added.id])).toEqual({ id: added.id, removed: true });
    expect(await json(["databases", "trusted-sources", "list", db.id])).toEqual([]);

    expect(await json(["databases", "pooler", "get", db.id])).toMatchObject({
      enabled: true,
      mode: "transaction",
      pool_size: 20,
      host: `${db.id}-pooler.db.invalid`,
    });
    expect(await json(["databases", "pooler", "update", db.id, "--mode", "session", "--pool-size", "10"])).toMatchObject({
      mode: "session",
      pool_size: 10,
    });
    const tooBig = await dbaas(["databases", "pooler", "update", db.id, "--pool-size", "46"]);
    expect(tooBig.code).toBe(1);
    expect(tooBig.stderr).toContain("pool_size:");
    expect((await dbaas(["databases", "pooler", "update", db.id, "--enabled", "maybe"])).code).toBe(2);
    expect(await json(["databases", "delete", db.id])).toEqual({ id: db.id, deleted: true });
  });

  it("backups create --wait and list; restore --wait to a new database", { timeout: 300_000 }, async () => {
    const env = { XDG_CONFIG_HOME: join(home, "backups") };
    expect(
      (
        await dbaas(["auth", "signup", "--email", email("bkp"), "--name", "B", "--organization", "Bkp"], {
          ...env,
          DBAAS_PASSWORD: PASSWORD,
        })
      ).code,
    ).toBe(0);
    const db = await json<{ id: string }>(
      ["databases", "create", "--name", "source", "--region", "fsn1", "--tier", "micro", "--wait"],
      env,
    );

    // The first base backup starts when the database first runs; one backup at a time, so wait for it to end.
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { backups } = await json<{ backups: { status: string }[] }>(["backups", "list", db.id], env);
      if (!backups.some((b) => b.status === "running")) break;
      if (Date.now() > deadline) throw new Error(`the first backup of ${db.id} still runs: ${JSON.stringify(backups)}`);
      await sleep(1000);
    }
    const created = await dbaas(["backups", "create", db.id, "--wait", "-o", "json"], env);
    expect(created.code, created.stderr).toBe(0);
    const backup = JSON.parse(created.stdout);
    expect(backup).toMatchObject({ id: expect.stringMatching(/^bkp-/), status: "completed", size_bytes: expect.any(Number) });
    expect(created.stderr).toContain(`${backup.id} completed`);

    const list = await json<{ backups: { id: string }[]; earliest_restore_time: string | null }>(["backups", "list", db.id], env);
    expect(list.backups.map((b) => b.id)).toContain(backup.id);
    expect(list.earliest_restore_time).toEqual(expect.any(String));
    const table = await dbaas(["backups", "list", db.id], env);
    expect(table.stdout).toMatch(new RegExp(`^${backup.id}\\s+\\w+\\s+completed`, "m"));
    expect(table.stdout).toMatch(/^Restorable from \S+ to \S+\.$/m);

    const restored = await dbaas(["restore", db.id, "--name", "restored", "--wait", "-o", "json"], env);
    expect(restored.code, restored.stderr).toBe(0);
    const copy = JSON.parse(restored.stdout);
    expect(copy).toMatchObject({ id: expect.stringMatching(/^db-/), name: "restored", status: "running", password: expect.any(String) });
    expect(copy.id).not.toBe(db.id);
    const psql = await dbaas(
      ["databases", "psql", copy.id, "--hostaddr", "127.0.0.1", "--password", copy.password, "--", "-XAtc", "SELECT 3"],
      env,
    );
    expect(psql).toMatchObject({ code: 0, stdout: "3\n" });
  });

  it("members: invite, invitations, cancel; an accepted invitation's member gets a role and is removed", { timeout: 120_000 }, async () => {
    const env = { XDG_CONFIG_HOME: join(home, "members") };
    const owner = email("owner");
    expect(
      (await dbaas(["auth", "signup", "--email", owner, "--name", "O", "--organization", "Team"], { ...env, DBAAS_PASSWORD: PASSWORD }))
        .code,
    ).toBe(0);

    const cancelled = await json<{ id: string; status: string }>(["members", "invite", "--email", email("no"), "--role", "viewer"], env);
    expect(cancelled).toMatchObject({ id: expect.any(String), status: "pending" });
    expect((await json<{ id: string }[]>(["members", "invitations"], env)).map((i) => i.id)).toEqual([cancelled.id]);
    expect(await json(["members", "cancel-invitation", cancelled.id], env)).toEqual({ id: cancelled.id, cancelled: true });

    const joiner = email("joiner");
    const invite = await dbaas(["members", "invite", "--email", joiner, "--role", "developer"], env);
    expect(invite.code, invite.stderr).toBe(0);
    expect(invite.stdout).toMatch(/^role:\s+developer$/m);
    const mail = await smtp.waitForMail((m) => m.to.includes(joiner), 30_000);
    await new DbaasClient({ baseUrl: stack.baseUrl }).auth.acceptInvitation({
      token: invitationToken(mail),
      password: PASSWORD,
      name: "J",
    });

    const members = await json<{ id: string; role: string; user: { email: string } }[]>(["members", "list"], env);
    expect(members.map((m) => [m.user.email, m.role]).sort()).toEqual(
      [
        [joiner, "developer"],
        [owner, "owner"],
      ].sort(),
    );
    const member = members.find((m) => m.user.email === joiner)!;
    expect(await json(["members", "set-role", member.id, "--role", "admin"], env)).toMatchObject({ id: member.id, role: "admin" });
    const table = await dbaas(["members", "list"], env);
    expect(table.stdout).toMatch(new RegExp(`^${member.id}\\s+${joiner.replace(/\./g, "\\.")}\\s+J\\s+admin`, "m"));
    expect(await json(["members", "remove", member.id], env)).toEqual({ id: member.id, removed: true });
    expect((await json<unknown[]>(["members", "list"], env)).length).toBe(1);
  });

  it("api-keys list and revoke; billing usage, invoices, payment methods and alerts", { timeout: 120_000 }, async () => {
    const env = { XDG_CONFIG_HOME: join(home, "billing") };
    expect(
      (
        await dbaas(["auth", "signup", "--email", email("bill"), "--name", "P", "--organization", "Pay"], {
          ...env,
          DBAAS_PASSWORD: PASSWORD,
        })
      ).code,
    ).toBe(0);

    const key = await json<{ id: string; secret: string }>(["api-keys", "create", "--name", "ci"], env);
    const keys = await json<{ id: string; name: string }[]>(["api-keys", "list"], env);
    expect(keys.map((k) => k.id)).toContain(key.id);
    expect(JSON.stringify(keys)).not.toContain(key.secret);
    expect((await dbaas(["api-keys", "list"], env)).stdout).toMatch(new RegExp(`^${key.id}\\s+ci\\s`, "m"));
    expect((await dbaas(["databases", "list", "-o", "json"], { ...env, DBAAS_TOKEN: key.secret })).code).toBe(0);
    expect(await json(["api-keys", "revoke", key.id], env)).toEqual({ id: key.id, revoked: true });
    // DBAAS_TOKEN wins over the config file's (valid) token.
    const revoked = await dbaas(["databases", "list"], { ...env, DBAAS_TOKEN: key.secret });
    expect(revoked.code).toBe(1);
    expect(revoked.stderr).toContain("HTTP 401");

    // The API's address comes from the config file the signup wrote when DBAAS_URL is unset.
    const usage = await json<{ total: number; currency: string }>(["billing", "usage"], { ...env, DBAAS_URL: "" });
    expect(usage).toMatchObject({ total: expect.any(Number), currency: "USD" });
    expect((await dbaas(["billing", "usage"], env)).stdout).toMatch(/^total:\s+[\d.]+$/m);
    expect(await json(["billing", "invoices"], env)).toEqual([]);
    expect((await dbaas(["billing", "invoices"], env)).stdout).toMatch(/^ID\s+PERIOD\s+AMOUNT/);

    expect(await json(["billing", "payment-methods"], env)).toEqual([]);
    const first = await json<{ id: string; default: boolean }>(["billing", "add-payment-method", "--token", "tok_visa"], env);
    const second = await json<{ id: string; default: boolean }>(["billing", "add-payment-method", "--token", "tok_mastercard"], env);
    expect([first.default, second.default]).toEqual([true, false]);
    expect(await json(["billing", "set-default-payment-method", second.id], env)).toMatchObject({ id: second.id, default: true });
    const methods = await dbaas(["billing", "payment-methods"], env);
    expect(methods.stdout).toMatch(new RegExp(`^${second.id}\\s+\\S+\\s+\\d{4}\\s+\\d+/\\d+\\s+yes$`, "m"));
    expect(await json(["billing", "remove-payment-method", first.id], env)).toEqual({ id: first.id, removed: true });
    expect((await json<{ id: string }[]>(["billing", "payment-methods"], env)).map((m) => m.id)).toEqual([second.id]);

    const alert = await json<{ id: string; threshold: number }>(["billing", "create-alert", "--threshold", "12.5"], env);
    expect(alert.threshold).toBe(12.5);
    expect((await json<{ id: string }[]>(["billing", "alerts"], env)).map((a) => a.id)).toEqual([alert.id]);
    expect(await json(["billing", "delete-alert", alert.id], env)).toEqual({ id: alert.id, deleted: true });
    expect(await json(["billing", "alerts"], env)).toEqual([]);

    expect(await json(["auth", "logout"], env)).toEqual({ logged_out: true });
    const config = JSON.parse(await readFile(join(env.XDG_CONFIG_HOME, "dbaas/config.json"), "utf8").catch(() => "{}"));
    expect(config.token).toBeUndefined();
  });
});
