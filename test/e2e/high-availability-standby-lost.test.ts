/**
 * Issue 21, high availability: a standby's host lost, on the real three-host stack with a real BIND
 * (docs/decisions.md, "A standby's lost host is replaced"). A synchronous database with one standby; the standby's
 * host is lost (its agent's restart held, the agent and the standby's postmaster killed with SIGKILL). Once its agent
 * has been silent for HA_STANDBY_REPLACE_AFTER_SECONDS (30 here, 120 by default) the standby is retired and a
 * replacement is seeded on the third host: it streams from the primary and has its writes, the operation
 * `standby_replaced` names both, and the primary took writes throughout. When the lost host returns, its agent
 * purges the retired standby's data, and the database keeps one standby. Times are printed, not asserted.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Api } from "../support/backups.ts";
import { logAbout, poll } from "../support/backups.ts";
import {
  agentHolding,
  bringBackHost,
  createHaDatabase,
  type HaStack,
  HOST_ADDRESS,
  haOf,
  loseHost,
  primaryHost,
  sqlOn,
  startHaStack,
  startWriter,
  type Writer,
} from "../support/ha.ts";
import { namedMissing } from "../support/named.ts";
import { account, asAgent } from "../support/replicas.ts";

const run = promisify(execFile);

const missing = namedMissing();
if (missing) console.warn(`e2e high-availability-standby-lost.test.ts skipped: ${missing}`);

/** The threshold this stack runs with: short, so the test does not wait two minutes. */
const REPLACE_AFTER_S = 30;

describe.skipIf(missing !== undefined)("a standby's host lost, on three simulated hosts with a real BIND", () => {
  let ha: HaStack;
  let api: Api;
  let writer: Writer | undefined;
  const created: string[] = [];
  /** Ids the stack's log is searched for when the test fails (the database and its members). */
  const logIds: string[] = [];
  const log = (...args: unknown[]) => console.log("[ha standby lost]", ...args);
  const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

  beforeAll(async () => {
    ha = await startHaStack("e2e_ha_standby_lost", { HA_STANDBY_REPLACE_AFTER_SECONDS: String(REPLACE_AFTER_S) });
    api = await account(ha.stack, "halost");
  }, 700_000);

  afterEach(async (ctx) => {
    if (ctx.task.result?.state === "fail") console.log(logAbout(ha.stack.output(), logIds, 150));
  });

  afterAll(async () => {
    await writer?.stop();
    for (const agent of Object.keys(HOST_ADDRESS)) await bringBackHost(ha.stack, agent).catch(() => {});
    for (const id of created) await api?.delete(`/v1/databases/${id}`).catch(() => {});
    await ha?.stop();
  });

  it("is retired once its agent was silent for the threshold; a replacement on the third host streams the primary's writes; the returning host purges the old one", async () => {
    const db = await createHaDatabase(api, "standby-lost", 1, true, (id) => created.push(id));
    const before = await haOf(api, db.id);
    const old = before.members.find((m) => m.role === "standby")!;
    const primary = await primaryHost(ha.named, db);
    const lostAgent = agentHolding(ha.stack, old.id)!;
    expect(lostAgent).not.toBe(primary.agent);
    const third = Object.keys(HOST_ADDRESS).find((a) => a !== lostAgent && a !== primary.agent)!;
    logIds.push(db.id, old.id);
    await sqlOn(db, primary.address, "CREATE TABLE acked (id int PRIMARY KEY)");
    writer = startWriter({ named: ha.named, host: db.host, port: db.port, password: db.password, ca: db.ca, table: "acked" });
    await poll(async () => writer!.acknowledged().length >= 20, 60_000, "writes flowing");

    const lostAt = await loseHost(ha.stack, lostAgent, old.id);
    log(`${lostAgent} lost (standby ${old.id}); primary on ${primary.agent}, third host ${third}`);
    // The replacement: another standby, on the third host, running (its agent reports it streaming).
    const replaced = await poll(
      async () => {
        const rec = await haOf(api, db.id);
        const s = rec.members.find((m) => m.role === "standby");
        return s && s.id !== old.id && s.status === "running" && rec;
      },
      300_000,
      "a replacement standby running",
    );
    const runningAt = Date.now();
    const replacement = replaced.members.find((m) => m.role === "standby")!;
    logIds.push(replacement.id);
    expect(replaced.members.map((m) => m.id)).not.toContain(old.id);
    expect(replaced.members).toHaveLength(2);
    expect(agentHolding(ha.stack, replacement.id)).toBe(third);
    const ops = (await api.get(`/v1/databases/${db.id}/operations?per_page=100`)).body.data.operations as Array<Record<string, string>>;
    const op = ops.filter((o) => o.type === "standby_replaced");
    expect(op).toHaveLength(1);
    expect(op[0]).toMatchObject({ status: "succeeded", from: old.id, to: replacement.id });
    expect(op[0]!.reason).toMatch(
      new RegExp(`^the standby ${old.id}'s host ${lostAgent} was not heard from since .* placed on ${third} at `),
    );
    const retiredAt = Date.parse(op[0]!.started_at!);
    // Never before the threshold: the agent's last heartbeat (every 3 s) came at most a few seconds before the loss.
    expect(retiredAt - lostAt).toBeGreaterThan((REPLACE_AFTER_S - 5) * 1000);
    expect(ops.filter((o) => o.type === "failover")).toEqual([]);
    // The CLI's operations table names both members.
    const key = (await api.post("/v1/organization/api-keys", { name: "operations" })).body.data.secret as string;
    const { DBAAS_TOKEN: _t, DBAAS_URL: _u, XDG_CONFIG_HOME: _x, ...env } = process.env;
    const table = await run(join(ha.stack.root, "node_modules/.bin/dbaas"), ["databases", "operations", db.id], {
      env: { ...env, HOME: ha.stack.dataDir, DBAAS_URL: ha.stack.baseUrl, DBAAS_TOKEN: key },
      timeout: 60_000,
    });
    expect(table.stdout).toMatch(new RegExp(`standby_replaced .*succeeded.*${old.id} → ${replacement.id}`));

    // It streams from the primary and has the writes acknowledged since.
    await poll(
      async () =>
        (await asAgent(ha.stack, db.id, "SELECT application_name, state FROM pg_stat_replication")).some(
          (r: { application_name: string; state: string }) => r.application_name === replacement.id && r.state === "streaming",
        ),
      60_000,
      `${replacement.id} streaming from the primary`,
    );
    const acked = writer.acknowledged();
    await poll(
      async () =>
        Number(
          (
            await asAgent(
              ha.stack,
              replacement.id,
              `SELECT count(*)::int AS n FROM acked WHERE id = ANY ('{${acked.join(",")}}'::int[])`,
              "defaultdb",
            )
          )[0]!.n,
        ) === acked.length,
      60_000,
      "the replacement has every acknowledged write",
    );
    // The primary took writes throughout (synchronous mode: only standbys that stream count).
    const gap = writer.longestGap(lostAt, Date.now());
    log(
      `retired ${secs(retiredAt - lostAt)} after the loss, replacement running ${secs(runningAt - lostAt)} after it; ` +
        `longest pause in writes ${secs(gap)}; ${acked.length} writes acknowledged`,
    );
    expect(gap).toBeLessThan(REPLACE_AFTER_S * 1000);

    // The lost host returns: its agent purges the retired standby's data; the database keeps its one standby.
    const backAt = Date.now();
    await bringBackHost(ha.stack, lostAgent);
    const oldDir = join(ha.stack.dataDir, "agents", lostAgent, "instances", old.id);
    await poll(async () => !existsSync(oldDir), 180_000, `${old.id}'s data removed from ${lostAgent}`);
    log(`the returning ${lostAgent} purged the retired standby ${secs(Date.now() - backAt)} after its restart was released`);
    expect((await haOf(api, db.id)).members.map((m) => [m.id, m.role])).toEqual([
      [replaced.members[0]!.id, "primary"],
      [replacement.id, "standby"],
    ]);
    await writer.stop();
    writer = undefined;
  }, 900_000);
});
