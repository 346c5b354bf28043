import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import type { Clock } from "@dbaas/kit";
import { AgentService } from "@dbaas/proto/agent";
import { DatabasesService } from "@dbaas/proto/databases";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failStrandedOperations, sweepExpiredDeletions } from "../src/background.ts";
import type { AppContext } from "../src/context.ts";
import { routes } from "../src/routes.ts";
import { CA_PEM, createDb, createHarness, expectCode, registerAgent, resetTables, runningDb, statusOf, type Harness } from "./harness.ts";

// Where time decides something — retention, when an agent counts as silent, how long reset-password waits —
// it is the context's clock, so a test (or a replay) moves time without touching the database.

let h: Harness;
const ORG = "org-clock";
const DAY_S = 24 * 3600;

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h?.close();
});

/** A clock `offsetS` seconds away from the real one. */
const shifted = (offsetS: number): Clock => ({ now: () => new Date(Date.now() + offsetS * 1000) });
const at = (clock: Clock): AppContext => ({ ...h.ctx, clock });
const dbsAt = (clock: Clock) => createClient(DatabasesService, createRouterTransport(routes(at(clock))));
const agentsAt = (clock: Clock) => createClient(AgentService, createRouterTransport(routes(at(clock))));

describe("the context's clock", () => {
  it("starts the retention window of a delete and decides when it has ended", async () => {
    await resetTables(h);
    const agent = await registerAgent(h, "clock-retention");
    const { database } = await runningDb(h, ORG, agent);
    await dbsAt(shifted(-8 * DAY_S)).deleteDatabase({ organizationId: ORG, id: database!.id });
    const { rows } = await h.ctx.pool.query("SELECT purge_after < now() - interval '1 day' AS past FROM databases WHERE id = $1", [
      database!.id,
    ]);
    expect(rows[0].past).toBe(true);

    const other = (await runningDb(h, ORG, agent)).database!;
    await h.dbs.deleteDatabase({ organizationId: ORG, id: other.id });
    // By the real clock only the first has ended; seven days on, both.
    expect(await sweepExpiredDeletions(at(shifted(DAY_S)))).toBe(1);
    expect(await sweepExpiredDeletions(h.ctx)).toBe(0);
    expect(await sweepExpiredDeletions(at(shifted(7 * DAY_S + 1)))).toBe(1);
  });

  it("decides when an agent has been silent too long: stranded operations, placement", async () => {
    await resetTables(h);
    const agent = await registerAgent(h, "clock-silent", { capacity: 10 });
    const { database } = await createDb(h, ORG);
    const later = shifted(h.ctx.cfg.agentTimeoutSeconds + 5);

    await expectCode(
      dbsAt(later).createDatabase({ organizationId: ORG, name: "too-late", region: "fsn1", tier: "micro" }),
      Code.ResourceExhausted,
    );
    expect(await failStrandedOperations(h.ctx)).toBe(0);
    expect(await failStrandedOperations(at(later))).toBe(1);
    expect(await statusOf(h, ORG, database!.id)).toBe("failed");

    // A report is "heard from" at the clock's now: from the later clock's point of view the agent is live again.
    await agentsAt(later).reportInstances({ agentId: agent, instances: [] });
    const created = await dbsAt(later).createDatabase({ organizationId: ORG, name: "in-time", region: "fsn1", tier: "micro" });
    expect(created.database!.status).toBe("provisioning");
  });

  it("records an agent's registration as heard from at the clock's now", async () => {
    await resetTables(h);
    await agentsAt(shifted(-3600)).registerAgent({
      agentId: "clock-stale",
      regions: ["fsn1"],
      capacity: 10,
      portRangeStart: 20000,
      portRangeEnd: 20999,
      versions: ["17"],
      caCertificatePem: CA_PEM,
    });
    await expectCode(createDb(h, ORG), Code.ResourceExhausted);
  });

  it("bounds how long reset-password waits for the agent", async () => {
    await resetTables(h);
    const agent = await registerAgent(h, "clock-reset");
    const { database } = await runningDb(h, ORG, agent);
    // Ten seconds pass between any two looks at this clock: the 5 s wait is over at the first.
    let ticks = 0;
    const racing: Clock = { now: () => new Date(Date.now() + 10_000 * ticks++) };
    const started = Date.now();
    const err = await expectCode(dbsAt(racing).resetPassword({ organizationId: ORG, id: database!.id }), Code.DeadlineExceeded);
    expect(err.rawMessage).toMatch(/did not confirm the new password in time/);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
