/**
 * Issue 21, high availability, the failures beyond a lost host in synchronous mode (high-availability.test.ts), on
 * the real three-host stack with a real BIND. Each test makes its own database and cleans up after it, so any one
 * runs alone (`-t`):
 * - asynchronous mode, the primary's host lost while the standby trails: what is lost is bounded by the lag the
 *   API reported just before;
 * - a database with a read replica fails over: the replica streams from the new primary (re-seeded when it cannot
 *   follow it);
 * - the control plane down for 60 s, every host fine: no failover, and what customers see;
 * - the primary's host cut from the control plane while a client writes to it directly: fenced before the lease
 *   runs out, the standby promoted, and after healing the old member comes back as a standby, its data discarded.
 * Times and sizes are printed (docs/decisions.md has what they showed).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Api } from "../support/backups.ts";
import { poll } from "../support/backups.ts";
import {
  agentHolding,
  bringBackHost,
  createHaDatabase,
  failoverOperations,
  type HaDatabase,
  type HaStack,
  haOf,
  healPartition,
  holdDown,
  loseHost,
  partitionFromControlPlane,
  partitionUnavailable,
  sqlOn,
  startHaStack,
  startWriter,
  waitMembersRunning,
  stallReplication,
  endStall,
  type Writer,
  primaryHost,
} from "../support/ha.ts";
import { logAbout } from "../support/backups.ts";
import { namedMissing } from "../support/named.ts";
import { account, getReplica, waitReplica } from "../support/replicas.ts";
import { holdFilePath } from "../../deploy/local/supervisor.ts";
import { existsSync } from "node:fs";
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";

const missing = namedMissing();
if (missing) console.warn(`e2e high-availability-failures.test.ts skipped: ${missing}`);

/** Each test, its database's set-up included, within this (two loaded cores). */
const TEST_MS = 240_000;

describe.skipIf(missing !== undefined)("high availability failures on three simulated hosts with a real BIND", () => {
  let ha: HaStack;
  let api: Api;
  let writers: Writer[] = [];
  /** The databases (and their members) the running test made. */
  const created: string[] = [];
  /** Ids the stack's log is searched for when a test fails. */
  const logIds: string[] = [];
  const log = (...args: unknown[]) => console.log("[ha failures]", ...args);
  const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

  /** The newest messages of instance `id`'s server log, wherever an agent of the stack keeps it (a failure's evidence). */
  const serverLogOf = async (id: string, lines = 60): Promise<string> => {
    const out: string[] = [];
    for (const agent of await readdir(join(ha.stack.dataDir, "agents")).catch(() => [] as string[])) {
      const dir = join(ha.stack.dataDir, "agents", agent, "server-logs", id);
      for (const f of (await readdir(dir).catch(() => [] as string[])).sort()) {
        for (const line of (await readFile(join(dir, f), "utf8")).split("\n")) {
          let e: Record<string, string> | undefined;
          try {
            e = JSON.parse(line) as Record<string, string>;
          } catch {
            continue;
          }
          if (e) out.push(`${agent} ${e.timestamp} ${e.error_severity}: ${e.message}${e.detail ? ` (${e.detail})` : ""}`);
        }
      }
    }
    return out.slice(-lines).join("\n");
  };

  beforeAll(async () => {
    ha = await startHaStack("e2e_ha_failures");
    api = await account(ha.stack, "hafail");
  }, 700_000);

  afterEach(async (ctx) => {
    if (ctx.task.result?.state === "fail") console.log(logAbout(ha.stack.output(), [...created, ...logIds], 150));
    logIds.splice(0);
    for (const w of writers) await w.stop();
    writers = [];
    await endStall().catch(() => {});
    await healPartition().catch(() => {});
    for (const service of ["agent-fsn1", "agent-fsn1-2", "agent-fsn1-3", "databases"]) {
      await rm(holdFilePath(ha.stack.dataDir, service), { force: true });
    }
    // A failed test's database goes too, so the next test has the hosts to itself.
    for (const id of created.splice(0)) await api.delete(`/v1/databases/${id}`).catch(() => {});
  });

  afterAll(async () => {
    await ha?.stop();
  });

  const writer = (w: Writer) => {
    writers.push(w);
    return w;
  };

  /** A new database with standbys, deleted after the test whatever happens; its members' ids noted for the log. */
  async function newDatabase(name: string, standbys: number, synchronous: boolean): Promise<HaDatabase> {
    const db = await createHaDatabase(api, name, standbys, synchronous, (id) => created.push(id));
    logIds.push(db.id, ...(await haOf(api, db.id)).members.map((m) => m.id));
    return db;
  }

  /** The WAL positions the control plane recorded last for the primary and the standby (what lag_bytes is made of). */
  async function reportedPositions(id: string, standbyId: string): Promise<{ primary: bigint; standby: bigint }> {
    const c = new pg.Client({ connectionString: ha.meta.url });
    await c.connect();
    const { rows } = await c
      .query<{ id: string; p: string }>("SELECT id, wal_position::text AS p FROM databases.databases WHERE id = ANY($1)", [[id, standbyId]])
      .finally(() => c.end());
    const at = (x: string) => BigInt(rows.find((r) => r.id === x)!.p);
    return { primary: at(id), standby: at(standbyId) };
  }

  /** When the primary's lease ends as the control plane recorded it (ms since the epoch). */
  async function leaseEnd(id: string): Promise<number> {
    const c = new pg.Client({ connectionString: ha.meta.url });
    await c.connect();
    const { rows } = await c
      .query<{ expires_at: Date }>("SELECT expires_at FROM databases.ha_leases WHERE database_id = $1", [id])
      .finally(() => c.end());
    if (!rows[0]) throw new Error(`no lease of ${id}`);
    return rows[0].expires_at.getTime();
  }

  /** The database deleted (its standbys and replicas go with it), so the next test has the hosts to itself. */
  async function remove(db: HaDatabase): Promise<void> {
    created.splice(created.indexOf(db.id), 1);
    const res = await api.delete(`/v1/databases/${db.id}`);
    // A failure names what the stack logged about the request (its id) and its errors.
    const requestId = String(res.body?.meta?.request_id ?? "-");
    const about = () =>
      ha.stack
        .output()
        .split("\n")
        .filter((l) => l.includes(requestId) || /\b(ERROR|error)\b/.test(l))
        .slice(-30)
        .join("\n");
    expect([200, 202, 204], `${JSON.stringify(res.body)}\n${res.status >= 500 ? about() : ""}`).toContain(res.status);
  }

  /** Once the lost host came back: its old primary discarded, recorded in the failover's operation. */
  async function waitDiscarded(db: HaDatabase): Promise<string> {
    const op = await poll(
      async () => (await failoverOperations(api, db.id)).find((o) => /was discarded at/.test(o.reason ?? "")),
      120_000,
      "the old primary discarded",
    );
    return op.reason!;
  }

  it(
    "asynchronous: the primary's host lost while the standby trails (its link stalled); the acknowledged writes lost are bounded by the lag reported just before",
    async () => {
      const db = await newDatabase("async-ha", 1, false);
      const before = await haOf(api, db.id);
      const standby = before.members[1]!;
      const old = await primaryHost(ha.named, db);
      const standbyAgent = agentHolding(ha.stack, standby.id)!;
      expect(standbyAgent).not.toBe(old.agent);
      await sqlOn(db, old.address, "CREATE TABLE acked (id int PRIMARY KEY, pad text NOT NULL)");
      // 2 kB a write, so the standby soon trails by a measurable amount; the statement answers its WAL position.
      const w = writer(
        startWriter({
          named: ha.named,
          host: db.host,
          port: db.port,
          password: db.password,
          ca: db.ca,
          table: "acked",
          statement: "INSERT INTO acked (id, pad) VALUES ($1, repeat('x', 2000)) RETURNING pg_current_wal_lsn()::text AS lsn",
        }),
      );
      await poll(async () => w.acknowledged().length >= 50, 60_000, "writes flowing");
      // The replication link stalls (what was in flight never arrives) and the primary goes on alone.
      const stall = await stallReplication(ha.stack, standbyAgent, standby.id);
      const trailing = await poll(
        async () => {
          // The two reports that lag is made of, as the control plane recorded them (its metadata database), read on
          // both sides of the API's answer: when a report arrived in between (the CI's failure: the API answered
          // from one pair, this read the next), the three reads say nothing together and are taken again.
          const seen = await reportedPositions(db.id, standby.id);
          const lag = Number((await haOf(api, db.id)).members[1]!.lag_bytes);
          const after = await reportedPositions(db.id, standby.id);
          if (after.primary !== seen.primary || after.standby !== seen.standby) return false;
          return lag >= 256 * 1024 && { lag, at: Date.now(), ...after };
        },
        60_000,
        "the API reporting the standby 256 KiB behind",
      );
      const lostAt = await loseHost(ha.stack, old.agent, db.id);
      const resumed = await poll(async () => w.firstAckAfter(lostAt, old.address), 180_000, "a write acknowledged by the new primary");
      await w.stop();
      await stall();

      const outcomes = w.outcomes().filter((o) => o.ok);
      const [address] = await ha.named.dig(db.host);
      expect(address).toBe(resumed.address);
      const present = new Set((await sqlOn(db, address!, "SELECT id FROM acked")).map((r) => r.id as number));
      const acknowledgedBefore = outcomes.filter((o) => o.at < lostAt);
      const lost = acknowledgedBefore.filter((o) => !present.has(o.id));
      // Only the tail is lost: every write before the first lost one is there.
      const firstLost = lost[0];
      if (firstLost) expect(acknowledgedBefore.filter((o) => o.id < firstLost.id && !present.has(o.id))).toEqual([]);
      // Bytes of WAL from the first lost write to the last write the old primary acknowledged (segment switches,
      // every 5 s here, count as the rest of their segment, in the lag as in this).
      const last = acknowledgedBefore.at(-1)!;
      const lostBytes = firstLost ? last.lsn! - firstLost.lsn! : 0n;
      // The lag reported is the primary's last reported position minus the standby's; the primary wrote on after its
      // report until its host was lost, so the bound is that lag plus what it wrote since its report.
      const since = last.lsn! - trailing.primary;
      const bound = BigInt(trailing.lag) + (since > 0n ? since : 0n);
      log(
        `async: lag reported ${trailing.lag} B ${secs(lostAt - trailing.at)} before the loss (+${since} B written since the ` +
          `primary's report); lost ${lost.length} of ${acknowledgedBefore.length} acknowledged writes = ${lostBytes} B of WAL ` +
          `(bound ${bound} B); writable again ${secs(resumed.at - lostAt)} after the loss on ${resumed.address}`,
      );
      expect(BigInt(trailing.lag)).toBe(trailing.primary - trailing.standby);
      expect(lostBytes <= bound, `${lostBytes} B lost > ${bound} B (lag ${trailing.lag} B reported)`).toBe(true);
      // Nothing the standby had reported receiving is lost (a write's position is where its row went; its commit follows).
      expect(lost.filter((o) => o.lsn! + 8192n < trailing.standby)).toEqual([]);
      // The writes acknowledged after the link stalled never reached the standby: some loss is certain.
      expect(lost.length).toBeGreaterThan(0);
      const after = await haOf(api, db.id);
      expect(after.last_failover).toMatchObject({ from: before.members[0]!.id, to: standby.id });
      expect(after.last_failover!.reason).toMatch(/promoted the standby with the most WAL \(\d+ bytes\)$/);

      // The host comes back (its discard is high-availability.test.ts's); the next test wants all three.
      await bringBackHost(ha.stack, old.agent);
      await remove(db);
    },
    TEST_MS,
  );

  // After the failover the replica either follows the new timeline, or cannot follow the new primary: it had replayed
  // WAL the lost primary wrote after the promoted standby's last position, or (seen here) the new primary had already
  // removed the WAL segment it needs. Its agent finds that in its log, stops it (provisioning, not running) and it is
  // seeded again from the new primary (docs/decisions.md, "A replica that cannot follow the new primary is
  // re-seeded"). Printed: the failover's time, the replica's to have the new primary's writes, its statuses meanwhile.
  it(
    "a database with a read replica fails over: the replica streams from the new primary and keeps up with writes made after",
    async () => {
      const db = await newDatabase("replicated-ha", 1, true);
      let old = await primaryHost(ha.named, db);
      const res = await api.post(`/v1/databases/${db.id}/replicas`, { name: "reporting" });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      logIds.push(res.body.data.id);
      const replica = await waitReplica(api, db.id, res.body.data.id, "running", 180_000);
      const replicaAgent = agentHolding(ha.stack, replica.id)!;
      if (replicaAgent === old.agent) {
        // Placed beside the primary (placement does not look at standbys): a switchover moves the primary away
        // first, so that losing its host leaves the replica alive.
        const sw = await api.post(`/v1/databases/${db.id}/failover`, {});
        expect(sw.status, JSON.stringify(sw.body)).toBe(202);
        await poll(
          async () => (await failoverOperations(api, db.id)).find((o) => o.id === sw.body.data.id && o.status === "succeeded"),
          120_000,
          "the switchover away from the replica's host",
        );
        await waitMembersRunning(api, db.id, 1, 180_000);
        old = await primaryHost(ha.named, db);
      }
      expect(old.agent, "the replica on a host the test does not lose").not.toBe(replicaAgent);
      const [replicaAddress] = await ha.named.dig(replica.host);
      const onReplica = (text: string) => sqlOn({ ...db, host: replica.host, port: replica.port }, replicaAddress!, text);

      await sqlOn(db, old.address, "CREATE TABLE acked (id int PRIMARY KEY)");
      const w = writer(startWriter({ named: ha.named, host: db.host, port: db.port, password: db.password, ca: db.ca, table: "acked" }));
      await poll(async () => w.acknowledged().length >= 20, 60_000, "writes flowing");
      const lostAt = await loseHost(ha.stack, old.agent, db.id);
      const resumed = await poll(async () => w.firstAckAfter(lostAt, old.address), 180_000, "a write acknowledged by the new primary");
      log(`replica: failover ${secs(resumed.at - lostAt)}`);
      // Writes made on the new primary reach the replica.
      await poll(async () => w.acknowledged().filter((id) => id >= resumed.id).length >= 20, 60_000, "writes after the failover");
      const after = w.acknowledged().filter((id) => id >= resumed.id);
      let replicaSaw = "";
      const target = Math.max(...after);
      // What the API said of the replica meanwhile (its status changes as its agent reports it).
      const statuses: string[] = [];
      const caughtUp = await poll(
        async () => {
          const r = await getReplica(api, db.id, replica.id);
          const seen = `${r?.status}${r?.status_reason ? ` (${r.status_reason})` : ""}`;
          if (statuses.at(-1) !== seen) statuses.push(seen);
          const rows = await onReplica(
            `SELECT count(*)::int AS n, pg_last_wal_receive_lsn()::text AS received, pg_last_wal_replay_lsn()::text AS replayed,
               (SELECT status FROM pg_stat_wal_receiver) AS receiver
             FROM acked WHERE id = ANY('{${after.join(",")}}'::int[])`,
          ).catch((e: Error): Record<string, any>[] => [{ error: e.message }]);
          replicaSaw = JSON.stringify(rows[0]);
          return rows[0]?.n === after.length && Date.now();
        },
        120_000,
        `the replica has the ${after.length} writes acknowledged by the new primary (through id ${target})`,
      ).catch(async (e: Error) => {
        throw new Error(`${e.message}; the replica last answered ${replicaSaw}; its server's log:\n${await serverLogOf(replica.id)}`);
      });
      log(
        `replica: has the new primary's writes ${secs(caughtUp - resumed.at)} after its first; its statuses meanwhile: ${statuses.join(" → ")}`,
      );
      // Not running while it cannot follow: a replica re-seeded shows so, with why.
      for (const st of statuses.filter((x) => x.startsWith("provisioning"))) expect(st).toMatch(/seeding it again from its primary/);
      await w.stop();
      // And goes on following it.
      const [address] = await ha.named.dig(db.host);
      await sqlOn(db, address!, "INSERT INTO acked (id) VALUES (-1)");
      await poll(async () => (await onReplica("SELECT 1 FROM acked WHERE id = -1").catch(() => [])).length === 1, 60_000, "a later write");
      expect((await waitReplica(api, db.id, replica.id, "running")).status).toBe("running");

      // The host comes back (its discard is high-availability.test.ts's); the next test wants all three.
      await bringBackHost(ha.stack, old.agent);
      await remove(db);
    },
    TEST_MS,
  );

  it(
    "the control plane down for 60 s, every host fine: no failover; the primaries fenced when their leases run out, writable again once it returns",
    async () => {
      const db = await newDatabase("cp-down-ha", 1, true);
      const before = await haOf(api, db.id);
      const old = await primaryHost(ha.named, db);
      await sqlOn(db, old.address, "CREATE TABLE acked (id int PRIMARY KEY)");
      const w = writer(startWriter({ named: ha.named, host: db.host, port: db.port, password: db.password, ca: db.ca, table: "acked" }));
      await poll(async () => w.acknowledged().length >= 20, 60_000, "writes flowing");
      const downAt = await holdDown(ha.stack, "databases");
      // The lease as the control plane granted it last (its end: the renewal's arrival + 10 s): the agent's own end is
      // at most that (it counts from sending the renewal), so it fences by expiresAt − 3 s.
      const expiresAt = await leaseEnd(db.id);
      await new Promise((r) => setTimeout(r, 60_000));
      const upAt = Date.now();
      await rm(holdFilePath(ha.stack.dataDir, "databases"), { force: true });
      const resumed = await poll(async () => w.firstAckAfter(upAt), 120_000, "a write after the control plane returned");
      // Then a whole lease and margin and more: nothing is promoted.
      await new Promise((r) => setTimeout(r, 20_000));
      await w.stop();

      const acks = w.outcomes().filter((o) => o.ok);
      const lastBefore = acks.filter((o) => o.at < upAt).at(-1)!;
      log(
        `control plane down ${secs(upAt - downAt)}: writes went on for ${secs(lastBefore.at - downAt)}, then none until ` +
          `${secs(resumed.at - upAt)} after it returned (${secs(resumed.at - lastBefore.at)} without writes)`,
      );
      // Fenced as its lease ran out, measured against the lease itself (not the kill: under load the last renewal can
      // be seconds older than the kill, as a fresh run found, writes ending 2.7 s after it): before a standby could
      // have been promoted (the lease's end + 2 s), and not while the lease still held beyond the agent's 3 s margin
      // (2.5 s of slack for the renewal's own time in flight, which the agent counts and the control plane does not).
      log(`the lease ended ${secs(expiresAt - downAt)} after the control plane went down`);
      expect(lastBefore.at).toBeLessThan(expiresAt + 2_000);
      expect(lastBefore.at).toBeGreaterThan(expiresAt - 3_000 - 2_500);
      expect(resumed.address).toBe(old.address);
      expect(await failoverOperations(api, db.id)).toEqual([]);
      const after = await haOf(api, db.id);
      expect(after.last_failover).toBeNull();
      expect(after.members.map((m) => [m.id, m.role])).toEqual(before.members.map((m) => [m.id, m.role]));
      expect(await ha.named.dig(db.host)).toEqual([old.address]);
      const present = new Set((await sqlOn(db, old.address, "SELECT id FROM acked")).map((r) => r.id as number));
      expect(w.acknowledged().filter((id) => !present.has(id))).toEqual([]);
      await remove(db);
    },
    TEST_MS,
  );

  it(
    "the primary's host cut from the control plane while a client writes to it directly: fenced before the lease ends, the standby promoted, the old member back as a standby after healing",
    async () => {
      const why = await partitionUnavailable();
      if (why) return console.warn(`partition test skipped: ${why}`);
      // Two standbys on three hosts: after the failover the only host left for the replacement is the old primary's.
      const db = await newDatabase("partition-ha", 2, true);
      const before = await haOf(api, db.id);
      const old = await primaryHost(ha.named, db);
      await sqlOn(db, old.address, "CREATE TABLE acked (id int PRIMARY KEY)");
      const direct = writer(
        startWriter({
          named: ha.named,
          host: db.host,
          port: db.port,
          password: db.password,
          ca: db.ca,
          table: "acked",
          address: old.address,
        }),
      );
      await poll(async () => direct.acknowledged().length >= 20, 60_000, "writes flowing to the primary directly");
      const cut = await partitionFromControlPlane(ha.stack, old.agent);
      log(`partition: ${old.agent} (${old.address}) cut from the control plane`);
      // When its agent logs the primary fenced (the reload done, before its sessions are ended).
      const fenceLine = `${old.agent.padEnd(10)} | instance ${db.id}: fenced (no client sessions)`;
      const seenBefore = ha.stack.output().split(fenceLine).length;
      const fencedSeen = (async () => {
        for (const end = Date.now() + 60_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
          if (ha.stack.output().split(fenceLine).length > seenBefore) return Date.now();
        }
        return Number.NaN;
      })();

      const failedOver = await poll(
        async () => {
          const h = await haOf(api, db.id);
          return h.last_failover !== null && h;
        },
        120_000,
        "the failover",
      );
      const promotedAt = Date.parse(failedOver.last_failover!.at);
      // Writes to the old primary stop before the lease could have run out, and never come back.
      await new Promise((r) => setTimeout(r, 10_000));
      const acks = direct.outcomes().filter((o) => o.ok);
      const lastOld = acks.at(-1)!;
      const fencedAt = await fencedSeen;
      log(
        `partition: fence logged ${secs(fencedAt - cut.at)} after the cut, last write on the old primary ` +
          `${secs(lastOld.at - cut.at)} after it; promoted ${secs(promotedAt - cut.at)} after it; ${acks.length} writes acknowledged there`,
      );
      expect(lastOld.at - cut.at).toBeLessThan(12_000);
      expect(lastOld.at).toBeLessThan(promotedAt);
      expect(failedOver.last_failover).toMatchObject({ from: before.members[0]!.id });
      expect(failedOver.last_failover!.reason).toMatch(new RegExp(`^${old.agent} stopped renewing the primary's lease`));
      const [address] = await poll(
        async () => {
          const a = await ha.named.dig(db.host);
          return a[0] !== old.address && a[0] !== undefined && a;
        },
        60_000,
        "the name moved",
      );
      // Every write the old primary acknowledged is on the new one (synchronous mode).
      let lastError = "";
      const rows = await poll(
        async () =>
          await sqlOn(db, address!, "SELECT id FROM acked").catch((e: Error) => {
            lastError = e.message;
            return undefined;
          }),
        60_000,
        "the new primary",
      ).catch((e: Error) => {
        throw new Error(`${e.message} (last error: ${lastError})`);
      });
      const present = new Set(rows.map((r) => r.id as number));
      expect(direct.acknowledged().filter((id) => !present.has(id))).toEqual([]);
      await direct.stop();

      // Healed: the old member's data is discarded (recorded in the operation) and it is re-seeded as a standby.
      const healedAt = Date.now();
      await cut.heal();
      const reason = await waitDiscarded(db);
      expect(reason).toMatch(new RegExp(`the old primary's data on ${old.agent} .* was discarded at`));
      const back = await waitMembersRunning(api, db.id, 2, 180_000);
      const onOldHost = back.members.find((m) => m.role === "standby" && agentHolding(ha.stack, m.id) === old.agent);
      expect(onOldHost, `a standby on ${old.agent} again`).toBeDefined();
      log(`partition: healed; ${old.agent} runs standby ${onOldHost!.id} ${secs(Date.now() - healedAt)} later`);
      // The old primary's instance is gone from that host.
      expect(existsSync(join(ha.stack.dataDir, "agents", old.agent, "instances", db.id))).toBe(false);
      await remove(db);
    },
    TEST_MS,
  );
});
