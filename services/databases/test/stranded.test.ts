import { ObservedState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failStrandedOperations } from "../src/background.ts";
import { createDb, createHarness, registerAgent, report, runningDb, statusOf, type Harness } from "./harness.ts";

let h: Harness;
const ORG = "org-stranded";

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h?.close();
});

/** As if the agent had last reported `seconds` ago. */
const silence = (agentId: string, seconds: number) =>
  h.ctx.pool.query("UPDATE agents SET last_seen_at = now() - make_interval(secs => $2) WHERE id = $1", [agentId, seconds]);

describe("operations stranded on a silent host", () => {
  it("end in failed naming the host, and heal when the agent reports the desired state", async () => {
    const agent = await registerAgent(h, "silent-a", { ports: [41000, 41099] });
    const provisioning = await createDb(h, ORG);
    const stopping = await runningDb(h, ORG, agent);
    await h.dbs.stopDatabase({ organizationId: ORG, id: stopping.database!.id });

    // Within the timeout nothing happens: the agent may just be busy.
    expect(await failStrandedOperations(h.ctx)).toBe(0);
    await silence(agent, h.ctx.cfg.agentTimeoutSeconds + 5);
    expect(await failStrandedOperations(h.ctx)).toBe(2);
    expect(await failStrandedOperations(h.ctx)).toBe(0);

    const got = (await h.dbs.getDatabase({ organizationId: ORG, id: provisioning.database!.id })).database!;
    expect(got.status).toBe("failed");
    expect(got.statusReason).toContain("host silent-a has not reported since");
    const ops = await h.dbs.listOperations({ organizationId: ORG, databaseId: provisioning.database!.id });
    expect(ops.operations[0]).toMatchObject({ type: "create", status: "failed" });
    expect(ops.operations[0]!.error).toContain("silent-a");

    // The host comes back: its reports settle both databases where they were meant to go.
    await report(h, agent, provisioning.database!.id, ObservedState.RUNNING);
    await report(h, agent, stopping.database!.id, ObservedState.STOPPED);
    expect(await statusOf(h, ORG, provisioning.database!.id)).toBe("running");
    expect(await statusOf(h, ORG, stopping.database!.id)).toBe("stopped");
  });

  it("leaves settled databases alone however long the host is silent", async () => {
    const agent = await registerAgent(h, "silent-b", { ports: [42000, 42099] });
    const db = await runningDb(h, ORG, agent);
    await silence(agent, 3600);
    expect(await failStrandedOperations(h.ctx)).toBe(0);
    expect(await statusOf(h, ORG, db.database!.id)).toBe("running");
  });
});
