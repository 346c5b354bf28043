/**
 * Issue 14: read replicas on the real stack with two agents (agent-fsn1 serves fsn1, agent-nbg1 serves nbg1 and
 * hel1). One primary in fsn1 gets a replica on its own agent and one in nbg1, on the other agent; the tests below
 * follow that primary in order: streaming, credentials, lag and billing; a resize; a promote; stop/start; delete.
 * Crash safety is in replicas-crash.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, waitRunning } from "../support/backups.ts";
import { type ApiResponse, createApi } from "../support/api.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { connectCustomer, query } from "../support/pgclient.ts";
import {
  account,
  agentOf,
  getReplica,
  type ReplicaJson,
  slotName,
  slotsOn,
  untilRows,
  waitReplica,
  withPassword,
} from "../support/replicas.ts";
import { startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let meta: TestDatabase;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_replicas");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1;nbg1,hel1",
    // The seed backup is requested through the backup scheduler's queue; samples carry the replicas' lag.
    env: { BACKUP_SCHEDULE_INTERVAL_MS: "1000", AGENT_SAMPLE_INTERVAL_MS: "1000" },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

/** Hourly prices of the tiers used here (docs/product.md, Billing), for replicas as for databases. */
const MICRO_HOURLY = 0.02;
const SMALL_HOURLY = 0.06;

describe("read replicas on real instances", { timeout: 180_000 }, () => {
  let api: Api;
  let primary: { id: string; host: string; password: string; connection_string: string; created_at: string };
  /** The primary's password now (reset-password changes it; replicas and the promoted database follow). */
  let password: string;
  let same: ReplicaJson;
  let other: ReplicaJson;
  const on = (r: { connection_string: string }) => withPassword(r.connection_string, password);

  it("streams to a replica on the primary's agent and to one in another region on the other agent", async () => {
    api = await account(stack, "rep");
    const created = await api.post("/v1/databases", { name: "rep-primary", region: "fsn1", tier: "micro" });
    expect(created.status).toBe(201);
    primary = created.body.data;
    password = primary.password;
    await waitRunning(api, primary.id);
    await query(primary.connection_string, "CREATE TABLE seen (n int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())");
    await query(primary.connection_string, "INSERT INTO seen (n) SELECT generate_series(1, 100)");

    const domain = primary.host.slice(primary.id.length + 1);
    // A larger tier than the primary's: it stays a valid hot standby when the primary is resized to small below.
    const a = await api.post(`/v1/databases/${primary.id}/replicas`, { name: "same-agent", tier: "small" });
    expect(a.status).toBe(201);
    same = a.body.data;
    expect(same.id).toMatch(/^rep-/);
    expect(same).toMatchObject({
      name: "same-agent",
      database_id: primary.id,
      region: "fsn1",
      tier: "small",
      host: `${same.id}.${domain}`,
      database: "defaultdb",
      username: "dbadmin",
    });
    expect(same.status).not.toBe("running");
    expect(typeof same.lag_bytes).toBe("number");
    // The primary's password is never shown again: masked as a database's is.
    expect(same.connection_string).toContain(":********@");
    expect(same.connection_string).toContain(`@${same.host}:${same.port}/`);
    const b = await api.post(`/v1/databases/${primary.id}/replicas`, { name: "other-agent", region: "nbg1" });
    expect(b.status).toBe(201);
    other = b.body.data;
    expect(other).toMatchObject({ region: "nbg1", tier: "micro", database_id: primary.id });

    const list = await api.get(`/v1/databases/${primary.id}/replicas`);
    expect(list.status).toBe(200);
    expect(list.body.data.replicas.map((r: ReplicaJson) => r.id).sort()).toEqual([same.id, other.id].sort());
    expect(list.body.meta).toMatchObject({ page: 1, total: 2 });

    await waitReplica(api, primary.id, same.id, "running");
    await waitReplica(api, primary.id, other.id, "running");
    expect(await agentOf(stack, primary.id)).toBe("agent-fsn1");
    expect(await agentOf(stack, same.id)).toBe("agent-fsn1");
    expect(await agentOf(stack, other.id)).toBe("agent-nbg1");
    expect((await slotsOn(stack, primary.id)).sort()).toEqual([slotName(same.id), slotName(other.id)].sort());

    for (const r of [same, other]) {
      // The primary's user and password, on the replica's own host and port.
      expect(await query(on(r), "SELECT count(*)::int AS n, pg_is_in_recovery() AS standby FROM seen")).toEqual([
        { n: 100, standby: true },
      ]);
      await expect(query(on(r), "INSERT INTO seen (n) VALUES (1000)")).rejects.toThrow(/read-only transaction/);
    }
    await query(primary.connection_string, "INSERT INTO seen (n) VALUES (101)");
    for (const r of [same, other]) await untilRows(on(r), "SELECT n FROM seen WHERE n = 101", (rows) => rows.length === 1, 5_000);
  });

  it("refuses what the design refuses: a duplicate name, an unknown tier or region, another organization, no card", async () => {
    const dup = await api.post(`/v1/databases/${primary.id}/replicas`, { name: "same-agent" });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe("resource_conflict");
    const badTier = await api.post(`/v1/databases/${primary.id}/replicas`, { name: "x-tier", tier: "enormous" });
    expect(badTier.status).toBe(422);
    expect(badTier.body.error.details.map((d: { field: string }) => d.field)).toContain("tier");
    const badRegion = await api.post(`/v1/databases/${primary.id}/replicas`, { name: "x-region", region: "mars1" });
    expect(badRegion.status).toBe(422);
    expect(badRegion.body.error.details.map((d: { field: string }) => d.field)).toContain("region");
    expect((await api.get(`/v1/databases/${primary.id}/replicas/rep-doesnotexist`)).status).toBe(404);

    // An organization on the free plan without a card: its free micro database runs, a replica would cost money.
    const stranger = createApi(stack.baseUrl);
    await stranger.signup("rep-free");
    expect((await stranger.get(`/v1/databases/${primary.id}/replicas/${same.id}`)).status).toBe(404);
    const own = await stranger.post("/v1/databases", { name: "free-one", region: "fsn1", tier: "micro" });
    expect(own.status).toBe(201);
    await waitRunning(stranger, own.body.data.id);
    const unpaid = await stranger.post(`/v1/databases/${own.body.data.id}/replicas`, { name: "unpaid" });
    expect(unpaid.status).toBe(402);
    expect(unpaid.body.error.code).toBe("payment_required");
    expect((await stranger.get(`/v1/databases/${own.body.data.id}/replicas/${same.id}`)).status).toBe(404);
  });

  it("reports lag on the record and in the primary's metrics, and bills replica hours apart from compute", async () => {
    const withLag = await getReplica(api, primary.id, same.id);
    expect(withLag!.lag_bytes).toBeGreaterThanOrEqual(0);
    const series = await untilMetrics(api, primary.id);
    expect(series.map((s) => s.labels.replica).sort()).toEqual([same.id, other.id].sort());
    for (const s of series) for (const [, v] of s.points) expect(v).toBeGreaterThanOrEqual(0);

    const usage = await untilUsage(api, (u) => u.replicas.hours > 0);
    // A replica costs hours × its tier's price, on its own line: one small and one micro here.
    expect(usage.replicas.amount).toBeGreaterThanOrEqual(usage.replicas.hours * MICRO_HOURLY - 0.0001);
    expect(usage.replicas.amount).toBeLessThanOrEqual(usage.replicas.hours * SMALL_HOURLY + 0.0001);
    // Compute is the primary's time only (two replicas counted in would add theirs, tens of seconds by now).
    const primarySeconds = (Date.now() - Date.parse(primary.created_at)) / 1000;
    expect(usage.compute.hours * 3600).toBeLessThanOrEqual(primarySeconds + 2);
  });

  it("a reset of the primary's password reaches the replicas through replication and ends the old password's sessions", async () => {
    const old = password;
    // Sessions opened with the old password, on the primary and on each replica.
    // Their end arrives as an error event: expected here (listened to from each one's connection on).
    const sessions = await Promise.all(
      [primary, same, other].map((r) => connectCustomer(withPassword(r.connection_string, old)).then((c) => c.on("error", () => {}))),
    );
    try {
      const reset = await api.post(`/v1/databases/${primary.id}/reset-password`);
      expect(reset.status).toBe(200);
      password = reset.body.data.password;
      for (const r of [same, other]) {
        await untilRefused(withPassword(r.connection_string, old));
        expect(await query(on(r), "SELECT 1 AS one")).toEqual([{ one: 1 }]);
      }
      // Each replica's agent ends them once the new verifier has arrived there by replication.
      for (const [i, c] of sessions.entries()) {
        const deadline = Date.now() + 60_000;
        while (
          await c.query("SELECT 1").then(
            () => true,
            () => false,
          )
        ) {
          if (Date.now() > deadline) throw new Error(`session ${i} opened with the old password still open 60 s after the reset`);
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    } finally {
      for (const c of sessions) await c.end().catch(() => {});
    }
  });

  it("a role made through the API logs in on the replicas; its reset ends its sessions there, old password refused, new one admitted", async () => {
    const made = await api.post(`/v1/databases/${primary.id}/roles`, { name: "replica_reader" });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    let role: { password: string } = made.body.data;
    await query(on(primary), "GRANT SELECT ON seen TO replica_reader");
    // The role, its verifier and the grant reach the replicas by replication only.
    for (const r of [same, other]) {
      await untilRows(asRole(r, role.password), "SELECT count(*)::int AS n FROM seen", (rows) => rows[0]?.n >= 100, 60_000);
    }
    const sessions = await Promise.all([same, other].map((r) => connectCustomer(asRole(r, role.password))));
    const ended = sessions.map((c) => new Promise<Error>((r) => c.on("error", r)));
    try {
      for (const c of sessions)
        expect((await c.query("SELECT current_user AS u, pg_is_in_recovery() AS standby")).rows).toEqual([
          { u: "replica_reader", standby: true },
        ]);
      const old = role.password;
      const reset = await api.post(`/v1/databases/${primary.id}/roles/replica_reader/reset-password`);
      expect(reset.status, JSON.stringify(reset.body)).toBe(200);
      role = reset.body.data;
      // When the answer arrives each replica has replayed the new verifier: no wait for replication here.
      for (const r of [same, other]) {
        await expect(query(asRole(r, old), "SELECT 1")).rejects.toThrow(/password authentication failed/);
        expect(await query(asRole(r, role.password), "SELECT current_user AS u")).toEqual([{ u: "replica_reader" }]);
      }
      // The sessions opened with the old password on the replicas were ended by their agents (the primary's own
      // ALTER ROLE never reaches a replica's backends): their end arrives as an error event.
      for (const [i, e] of ended.entries()) {
        const err = await Promise.race([e, new Promise<undefined>((r) => setTimeout(() => r(undefined), 60_000))]);
        expect(err?.message ?? "still open 60 s after the answer", `the session on ${[same, other][i]!.id}`).toMatch(/terminat/i);
      }
    } finally {
      for (const c of sessions) await c.end().catch(() => {});
    }
  });

  it("a role's reset while a replica's agent is silent is 504 saying so; once it answers again a reset goes through", async () => {
    const agent = await stack.pid("agent-nbg1");
    process.kill(agent, "SIGSTOP");
    let res: ApiResponse;
    try {
      res = await api.post(`/v1/databases/${primary.id}/roles/replica_reader/reset-password`);
    } finally {
      process.kill(agent, "SIGCONT");
    }
    expect(res.status, JSON.stringify(res.body)).toBe(504);
    expect(res.body.error.code).toBe("upstream_timeout");
    expect(res.body.error.message).toMatch(/sessions on a replica could not be ended.*reset again/);
    expect(JSON.stringify(res.body)).not.toMatch(/postgresql:\/\//);

    let again: ApiResponse | undefined;
    await poll(
      async () => {
        again = await api.post(`/v1/databases/${primary.id}/roles/replica_reader/reset-password`);
        return again.status === 200;
      },
      90_000,
      "a reset going through once agent-nbg1 answers again",
    );
    for (const r of [same, other]) {
      expect(await query(asRole(r, again!.body.data.password), "SELECT current_user AS u")).toEqual([{ u: "replica_reader" }]);
    }
  });

  it("a resize of the primary leaves a replica alone, which streams on", async () => {
    const startedAt = async () => (await query(on(same), "SELECT pg_postmaster_start_time() AS t"))[0].t.getTime();
    const before = await startedAt();
    const resize = await api.post(`/v1/databases/${primary.id}/resize`, { tier: "small" });
    expect(resize.status).toBe(200);
    await waitRunning(api, primary.id);
    expect((await getReplica(api, primary.id, same.id))!).toMatchObject({ status: "running", tier: "small" });
    expect(await startedAt()).toBe(before);
    await query(on(primary), "INSERT INTO seen (n) VALUES (102)");
    await untilRows(on(same), "SELECT n FROM seen WHERE n = 102", (rows) => rows.length === 1, 15_000);
  });

  it("a replica now smaller than its resized primary catches up too", async () => {
    // The primary's larger max_connections (and friends) reach the micro replica in the WAL; PostgreSQL pauses
    // replay there ("insufficient parameter settings") until the standby runs with at least the primary's values.
    await untilRows(on(other), "SELECT n FROM seen WHERE n = 102", (rows) => rows.length === 1, 60_000);
    expect((await getReplica(api, primary.id, other.id))!.status).toBe("running");
  });

  it("promotes the replica on the other agent into an independent, writable database; its slot goes", async () => {
    // The primary is idle and the replica has received all of its WAL: promoted, it holds exactly the primary's rows.
    const [held] = await query(on(primary), "SELECT count(*)::int AS n FROM seen");
    const res = await api.post(`/v1/databases/${primary.id}/replicas/${other.id}/promote`);
    expect(res.status).toBe(200);
    const promoted = res.body.data;
    expect(promoted.id).toMatch(/^db-/);
    expect(promoted).toMatchObject({ name: "other-agent", region: "nbg1", tier: "micro" });
    expect(promoted).not.toHaveProperty("password");
    const shown = await api.get(`/v1/databases/${promoted.id}`);
    expect(Object.keys(shown.body.data).sort()).toEqual(Object.keys(promoted).sort());

    expect(await getReplica(api, primary.id, other.id)).toBeUndefined();
    const list = await api.get(`/v1/databases/${primary.id}/replicas`);
    expect(list.body.data.replicas.map((r: ReplicaJson) => r.id)).toEqual([same.id]);

    await waitRunning(api, promoted.id);
    expect(await agentOf(stack, promoted.id)).toBe("agent-nbg1");
    const cs = on(promoted);
    expect(await query(cs, "SELECT count(*)::int AS n, pg_is_in_recovery() AS standby FROM seen")).toEqual([{ n: held.n, standby: false }]);
    await query(cs, "INSERT INTO seen (n) VALUES (500)");
    // Independent: the old primary's new rows are not its, nor its rows the primary's.
    await query(on(primary), "INSERT INTO seen (n) VALUES (103)");
    await untilRows(on(same), "SELECT n FROM seen WHERE n = 103", (rows) => rows.length === 1, 15_000);
    expect(await query(cs, "SELECT n FROM seen WHERE n IN (103, 500) ORDER BY n")).toEqual([{ n: 500 }]);
    await poll(async () => (await slotsOn(stack, primary.id)).join() === slotName(same.id), 30_000, "the promoted replica's slot dropped");
  });

  it("stopping the primary stops its replica, starting it starts it", async () => {
    expect((await api.post(`/v1/databases/${primary.id}/stop`)).status).toBe(200);
    await waitRunning(api, primary.id, "stopped");
    await waitReplica(api, primary.id, same.id, "stopped");
    await expect(query(on(same), "SELECT 1")).rejects.toThrow();
    // A replica of a stopped primary is not promoted, and none is added.
    expect((await api.post(`/v1/databases/${primary.id}/replicas/${same.id}/promote`)).status).toBe(409);
    const refused = await api.post(`/v1/databases/${primary.id}/replicas`, { name: "late" });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain("stopped");

    expect((await api.post(`/v1/databases/${primary.id}/start`)).status).toBe(200);
    await waitRunning(api, primary.id);
    await waitReplica(api, primary.id, same.id, "running");
    await query(on(primary), "INSERT INTO seen (n) VALUES (104)");
    await untilRows(on(same), "SELECT n FROM seen WHERE n = 104", (rows) => rows.length === 1, 15_000);
  });

  it("deleting the primary deletes its replica and its data at once; the promoted database lives on", async () => {
    expect((await api.delete(`/v1/databases/${primary.id}`)).status).toBe(204);
    expect(await getReplica(api, primary.id, same.id)).toBeUndefined();
    await poll(async () => (await agentOf(stack, same.id)) === undefined, 60_000, `${same.id}'s data directory purged`);
    const databases = (await api.get("/v1/databases")).body.data.databases as { name: string; status: string }[];
    expect(databases.map((d) => `${d.name}:${d.status}`)).toEqual(["other-agent:running"]);
  });
});

async function poll(fn: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      if (await fn()) return;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ""}`);
}

interface Series {
  labels: Record<string, string>;
  points: [number, number][];
}

/** The primary's replication_lag_bytes series once every replica has a point (samples come each second here). */
async function untilMetrics(api: Api, id: string): Promise<Series[]> {
  let series: Series[] = [];
  await poll(
    async () => {
      const res = await api.get(`/v1/databases/${id}/metrics?names=replication_lag_bytes`);
      expect(res.status).toBe(200);
      series = res.body.data.metrics.find((m: { name: string }) => m.name === "replication_lag_bytes")?.series ?? [];
      return series.length === 2 && series.every((s) => s.points.length > 0);
    },
    30_000,
    "replication_lag_bytes of both replicas",
  );
  return series;
}

type Line = { hours: number; amount: number };
async function untilUsage(api: Api, ok: (u: { compute: Line; replicas: Line }) => boolean) {
  let usage: { compute: Line; replicas: Line } | undefined;
  await poll(
    async () => {
      usage = (await api.get("/v1/billing/usage")).body.data.usage;
      return ok(usage!);
    },
    30_000,
    "the usage report",
  );
  return usage!;
}

/** A replica's connection string (user and password masked) as the customer role `replica_reader` with `password`. */
function asRole(r: { connection_string: string }, password: string): string {
  const url = new URL(r.connection_string);
  url.username = "replica_reader";
  url.password = encodeURIComponent(password);
  return url.toString();
}

/** Password authentication on `cs` refused (the new verifier replayed), within seconds. */
async function untilRefused(cs: string): Promise<void> {
  await poll(
    async () => {
      try {
        await query(cs, "SELECT 1");
        return false;
      } catch (err) {
        return /password authentication failed/.test((err as Error).message);
      }
    },
    15_000,
    "the old password refused",
  );
}
