/**
 * Issue 21, high availability, on the real stack: three agents for fsn1 simulate three hosts (127.0.0.2-4, the same
 * instance ports), a real BIND keeps the databases' names. A synchronous database with one standby takes writes
 * without pause through its unchanged host name; with the customer's work_mem and max_connections in force, its primary's host is lost (the agent's restart held, the agent and
 * the postmaster killed with SIGKILL): the standby is promoted once the lease ran out, the name moves, every
 * acknowledged write is there, the new primary runs with the customer's configuration, a replacement standby is seeded on the third host, and the returning host discards
 * its old primary. Then a planned switchover, under the same writes, with nothing lost. Times are printed, not
 * asserted (docs/benchmarks.md has `npm run bench:ha`'s).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Api } from "../support/backups.ts";
import { poll } from "../support/backups.ts";
import { agentAt, bringBackHost, HOST_ADDRESS, haOf, loseHost, startWriter, waitMembersRunning, type Writer } from "../support/ha.ts";
import { type Named, namedMissing, startNamed } from "../support/named.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { account, asAgent } from "../support/replicas.ts";
import { startStack, type Stack } from "../support/stack.ts";

const run = promisify(execFile);

const missing = namedMissing();
if (missing) console.warn(`e2e high-availability.test.ts skipped: ${missing}`);

const ZONE = "db.test";

interface DbJson {
  id: string;
  host: string;
  port: number;
  password: string;
  status: string;
}

describe.skipIf(missing !== undefined)("high availability on three simulated hosts with a real BIND", { timeout: 600_000 }, () => {
  let named: Named;
  let meta: TestDatabase;
  let stack: Stack;
  let api: Api;
  let db: DbJson;
  let ca: string;
  let writer: Writer | undefined;
  const log = (...args: unknown[]) => console.log("[ha e2e]", ...args);

  /** `text` as the customer on the database's host `address`, verify-full against its name and the CA bundle. */
  async function sql(address: string, text: string): Promise<Record<string, unknown>[]> {
    const c = new pg.Client({
      host: address,
      port: db.port,
      user: "dbadmin",
      password: db.password,
      database: "defaultdb",
      ssl: { ca, servername: db.host },
    });
    await c.connect();
    try {
      return (await c.query(text)).rows;
    } finally {
      await c.end();
    }
  }

  /** Every acknowledged write is in the table, read through the name as it resolves now. */
  async function expectAllAcknowledged(acknowledged: number[]): Promise<void> {
    const [address] = await named.dig(db.host);
    const present = new Set((await sql(address!, "SELECT id FROM acked")).map((r) => r.id as number));
    const lost = acknowledged.filter((id) => !present.has(id));
    expect(lost, `acknowledged writes missing after the failover (${acknowledged.length} acknowledged)`).toEqual([]);
  }

  const failoverOps = async () =>
    ((await api.get(`/v1/databases/${db.id}/operations?per_page=100`)).body.data.operations as Array<Record<string, string>>).filter(
      (o) => o.type === "failover",
    );

  beforeAll(async () => {
    named = await startNamed(ZONE);
    meta = await createTestDatabase("e2e_ha");
    stack = await startStack({
      databaseUrl: meta.url,
      agents: "fsn1;fsn1;fsn1",
      // Three agents build their templates one after the other before the stack is ready: minutes under load.
      readyTimeoutMs: 600_000,
      env: {
        DATABASE_DOMAIN: ZONE,
        DNS_PROVIDER: "rfc2136",
        DNS_SERVER: named.server,
        DNS_ZONE: ZONE,
        DNS_TSIG_KEY: named.tsigKey,
        DNS_RECONCILE_INTERVAL_MS: "2000",
        // Seeds complete in seconds: the backup schedule looks every second, WAL is archived every 5 s.
        BACKUP_SCHEDULE_INTERVAL_MS: "1000",
        BACKUP_ARCHIVE_TIMEOUT_S: "5",
        // The switchover is called off when the standby has not received the fenced primary's WAL within this (30 s
        // by default, safe: the primary keeps running). A fresh-clone CI under load met the default once; the test
        // is about the switchover's outcome, not its speed (bench:ha measures that).
        HA_SWITCHOVER_TIMEOUT_MS: "120000",
      },
    });
  }, 700_000);

  afterAll(async () => {
    await writer?.stop();
    for (const agent of Object.keys(HOST_ADDRESS)) await bringBackHost(stack, agent).catch(() => {});
    await stack?.destroy();
    await meta?.drop();
    await named?.stop();
  });

  it("a synchronous database with a standby: on another host at the same port, no name for the standby, the region's CA bundle, commits acknowledged by the standby", async () => {
    api = await account(stack, "ha");
    const res = await api.post("/v1/databases", { name: "orders-ha", region: "fsn1", tier: "micro", standbys: 1, synchronous: true });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    db = res.body.data;
    const ha = await waitMembersRunning(api, db.id, 1);
    expect(ha).toMatchObject({ standbys: 1, synchronous: true, last_failover: null });
    expect(ha.members.map((m) => m.role)).toEqual(["primary", "standby"]);
    const [address] = await named.dig(db.host);
    expect(Object.values(HOST_ADDRESS)).toContain(address);
    // The standby has no name of its own (not reachable by customers).
    expect(await named.digStatus(`${ha.members[1]!.id}.${ZONE}`)).toBe("NXDOMAIN");
    // The CA bundle of the region's hosts: it verifies whichever host the database runs on.
    ca = (await api.get(`/v1/databases/${db.id}/ca-certificate`)).body as string;
    expect(ca.match(/BEGIN CERTIFICATE/g)).toHaveLength(3);
    // Once the standby streams, the primary commits only when it has the WAL.
    await poll(
      async () => (await asAgent(stack, db.id, "SELECT sync_state FROM pg_stat_replication"))[0]?.sync_state === "quorum",
      60_000,
      "the standby synchronous",
    );
    const setting = await asAgent(stack, db.id, "SHOW synchronous_standby_names");
    expect(setting[0].synchronous_standby_names).toBe(`ANY 1 ("${ha.members[1]!.id}")`);

    // Billed as compute per running node: this organization's compute hours grow twice as fast as the wall clock
    // (hours to 4 decimals, 0.36 s). Read over 10 s windows until the standby's running event has reached billing.
    const computeHours = async () => {
      const usage = await api.get("/v1/billing/usage");
      expect(usage.status).toBe(200);
      return { hours: usage.body.data.usage.compute.hours as number, at: Date.now() };
    };
    let rate = 0;
    await poll(
      async () => {
        const a = await computeHours();
        await new Promise((r) => setTimeout(r, 10_000));
        const b = await computeHours();
        rate = ((b.hours - a.hours) * 3_600_000) / (b.at - a.at);
        return rate > 1.8 && rate < 2.2;
      },
      90_000,
      "compute hours accruing for two running nodes",
    ).catch((e) => {
      throw new Error(`${e.message}: the last rate was ${rate.toFixed(2)} node-hours per hour`);
    });
  });

  /** The database's configuration through the API, by parameter name. */
  const config = async () => {
    const res = await api.get(`/v1/databases/${db.id}/config`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return Object.fromEntries(res.body.data.parameters.map((p: { name: string }) => [p.name, p])) as Record<string, any>;
  };
  const settings = async (address: string) =>
    (await sql(address, "SELECT current_setting('work_mem') AS work_mem, current_setting('max_connections') AS max_connections"))[0];

  it("the customer's configuration, a restart-only parameter included, is in force on the primary after a restart", async () => {
    expect(db, "the database of the first test").toBeDefined();
    // max_connections is one a standby does not take (hot standby runs it at the largest tier's value): the new
    // primary must still run with the customer's after a failover (the next test).
    const res = await api.patch(`/v1/databases/${db.id}/config`, { parameters: { work_mem: "64MB", max_connections: 40 } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await config()).max_connections).toMatchObject({ value: 40, pending_restart: true });
    expect((await api.post(`/v1/databases/${db.id}/restart`)).status).toBe(200);
    await poll(async () => (await api.get(`/v1/databases/${db.id}`)).body.data.status === "running", 180_000, "running after the restart");
    await waitMembersRunning(api, db.id, 1);
    const cfg = await config();
    expect(cfg.max_connections).toMatchObject({ value: 40, overridden: true, pending_restart: false });
    expect(cfg.work_mem).toMatchObject({ value: 65536, overridden: true, pending_restart: false });
    const [address] = await named.dig(db.host);
    expect(await settings(address!)).toEqual({ work_mem: "64MB", max_connections: "40" });
  });

  it("the primary's host lost (agent and postmaster SIGKILLed) under continuous writes: the standby takes over behind the same name, no acknowledged write lost, a replacement standby seeded", async () => {
    expect(db, "the database of the first test").toBeDefined();
    const [oldAddress] = await named.dig(db.host);
    const lostAgent = agentAt(oldAddress!)!;
    const before = await haOf(api, db.id);
    const standby = before.members[1]!;
    await sql(oldAddress!, "CREATE TABLE acked (id int PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())");
    writer = startWriter({ named, host: db.host, port: db.port, password: db.password, ca, table: "acked" });
    await poll(async () => writer!.acknowledged().length >= 50, 60_000, "writes flowing");
    const lostAt = await loseHost(stack, lostAgent, db.id);
    log(`lost ${lostAgent} (${oldAddress}) at ${new Date(lostAt).toISOString()} with ${writer.acknowledged().length} writes acknowledged`);

    // Writable again through the unchanged name, on another host.
    const resumed = await poll(async () => writer!.firstAckAfter(lostAt, oldAddress), 180_000, "a write acknowledged by the new primary");
    log(
      `failover: first acknowledged write through the name ${((resumed.at - lostAt) / 1000).toFixed(1)} s after the loss, on ${resumed.address}`,
    );
    await new Promise((r) => setTimeout(r, 3000));
    await writer.stop();
    const acknowledged = writer.acknowledged();
    writer = undefined;
    await expectAllAcknowledged(acknowledged);

    const [newAddress] = await named.dig(db.host);
    expect(newAddress).toBe(resumed.address);
    expect(newAddress).not.toBe(oldAddress);
    const after = await haOf(api, db.id);
    expect(after.last_failover).toMatchObject({ from: before.members[0]!.id, to: standby.id });
    expect(after.last_failover!.reason).toMatch(new RegExp(`^${lostAgent} stopped renewing the primary's lease .* synchronous mode\\)$`));
    expect(after.members[0]).toMatchObject({ id: standby.id, role: "primary", status: "running" });
    const op = (await failoverOps())[0]!;
    expect(op).toMatchObject({ status: "succeeded", from: before.members[0]!.id, to: standby.id });

    // The new primary runs with the database's configuration, the restart-only max_connections included (the
    // promotion's start writes it), and the API says nothing waits for a restart.
    expect(await settings(newAddress!)).toEqual({ work_mem: "64MB", max_connections: "40" });
    const cfg = await config();
    expect(cfg.max_connections).toMatchObject({ value: 40, overridden: true, pending_restart: false });
    expect(cfg.work_mem).toMatchObject({ value: 65536, overridden: true, pending_restart: false });

    // The lost standby is replaced: on the third host (neither the new primary's nor the lost one).
    const replaced = await waitMembersRunning(api, db.id, 1);
    expect(replaced.members[1]!.id).not.toBe(standby.id);
    log(`replacement standby ${replaced.members[1]!.id} running ${((Date.now() - lostAt) / 1000).toFixed(0)} s after the loss`);

    // The lost host comes back: its old primary is discarded (never served again), and the operation says so.
    await bringBackHost(stack, lostAgent);
    await poll(async () => /was discarded at/.test((await failoverOps())[0]!.reason ?? ""), 180_000, "the old primary discarded");
    expect(existsSync(join(stack.dataDir, "agents", lostAgent, "instances", db.id))).toBe(false);
    expect(await named.dig(db.host)).toEqual([newAddress]);
  });

  it("a planned switchover under continuous writes, asked for with `dbaas databases failover --wait`: the healthiest standby promoted behind the same name, nothing lost", async () => {
    expect(db, "the database of the first test").toBeDefined();
    const before = await waitMembersRunning(api, db.id, 1);
    const [oldAddress] = await named.dig(db.host);
    await sql(oldAddress!, "CREATE TABLE acked_switchover (id int PRIMARY KEY)");
    writer = startWriter({ named, host: db.host, port: db.port, password: db.password, ca, table: "acked_switchover" });
    await poll(async () => writer!.acknowledged().length >= 50, 60_000, "writes flowing");
    // Asked for through the CLI, as an operator would (`dbaas databases failover --wait`: the API's 202, then the
    // operation followed until it settles, with progress on stderr).
    const key = (await api.post("/v1/organization/api-keys", { name: "switchover" })).body.data.secret as string;
    const askedAt = Date.now();
    const { DBAAS_TOKEN: _t, DBAAS_URL: _u, XDG_CONFIG_HOME: _x, ...env } = process.env;
    const cli = await run(join(stack.root, "node_modules/.bin/dbaas"), ["databases", "failover", db.id, "--wait", "-o", "json"], {
      env: { ...env, HOME: stack.dataDir, DBAAS_URL: stack.baseUrl, DBAAS_TOKEN: key },
      timeout: 300_000,
    });
    const done = JSON.parse(cli.stdout);
    expect(cli.stderr).toContain(`${db.id}: switching over to ${before.members[1]!.id}`);
    expect(done).toMatchObject({ type: "failover", status: "succeeded", from: before.members[0]!.id, to: before.members[1]!.id });
    expect((await failoverOps()).find((o) => o.id === done.id)?.status).toBe("succeeded");
    const resumed = await poll(async () => writer!.firstAckAfter(askedAt, oldAddress), 120_000, "a write on the new primary");
    await new Promise((r) => setTimeout(r, 2000));
    await writer.stop();
    const acknowledged = writer.acknowledged();
    const window = writer.longestGap(askedAt, resumed.at);
    writer = undefined;
    log(
      `switchover: writes paused for ${(window / 1000).toFixed(1)} s at most; first write on ${resumed.address} ${((resumed.at - askedAt) / 1000).toFixed(1)} s after the request`,
    );
    const [address] = await named.dig(db.host);
    expect(address).not.toBe(oldAddress);
    const present = new Set((await sql(address!, "SELECT id FROM acked_switchover")).map((r) => r.id as number));
    expect(acknowledged.filter((id) => !present.has(id))).toEqual([]);
    // A switchover's new primary runs the database's configuration too.
    expect(await settings(address!)).toEqual({ work_mem: "64MB", max_connections: "40" });
    const after = await haOf(api, db.id);
    expect(after.last_failover).toMatchObject({ from: before.members[0]!.id, to: before.members[1]!.id });
    expect(after.last_failover!.reason).toMatch(
      /^planned switchover: the primary was fenced at WAL position \d+ and the standby had received \d+/,
    );
    // The old primary is re-seeded as a standby (its data discarded; no pg_rewind), so the database has its standby again.
    await waitMembersRunning(api, db.id, 1);
  });
});
