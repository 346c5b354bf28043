import { Code } from "@connectrpc/connect";
import { DesiredState, ObservedState, type WatchAssignmentsResponse } from "@dbaas/proto/agent";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DOMAIN, countingFeed, createDb, createHarness, eventually, registerAgent, rejection, type Harness } from "./harness.ts";

let h: Harness;
const ORG = "org-watch";

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h?.close();
});

const open: AbortController[] = [];
afterEach(() => {
  for (const a of open.splice(0)) a.abort();
});

/** An agent's watch stream read one message at a time, each within `ms` or the test fails. */
function watch(agentId: string) {
  const abort = new AbortController();
  open.push(abort);
  const it = h.agents.watchAssignments({ agentId }, { signal: abort.signal })[Symbol.asyncIterator]();
  return {
    /** Asks for the next message now; await the result later. */
    next(ms = 2000): Promise<WatchAssignmentsResponse> {
      const msg = it.next();
      // Aborting at the end of the test rejects a read still pending; that is not a failure.
      msg.catch(() => {});
      return Promise.race([
        msg.then((r) => {
          if (r.done) throw new Error("watch stream ended");
          return r.value;
        }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no watch message within ${ms} ms`)), ms)),
      ]);
    },
  };
}

describe("WatchAssignments", () => {
  it("refuses an agent that has not registered", async () => {
    const err = await rejection(watch("ghost").next());
    expect(Code[err.code]).toBe("NotFound");
  });

  it("starts with the snapshot of the agent's instances, and only its own", async () => {
    await registerAgent(h, "w-snap", { regions: ["hel1"], ports: [60000, 60099] });
    await registerAgent(h, "w-other", { regions: ["nbg1"] });
    const a = (await createDb(h, ORG, { region: "hel1", tier: "small" })).database!;
    const b = (await createDb(h, ORG, { region: "hel1", version: "17" })).database!;
    await createDb(h, ORG, { region: "nbg1" });

    const first = await watch("w-snap").next();
    expect(first.instances.map((i) => i.databaseId)).toEqual([a.id, b.id].sort());
    const spec = first.instances.find((i) => i.databaseId === a.id)!;
    expect(spec).toMatchObject({
      version: "17",
      tier: "small",
      port: 60000,
      desiredState: DesiredState.RUNNING,
      generation: 1n,
      credentialsGeneration: 1n,
      host: `${a.id}.${DOMAIN}`,
    });
    expect(spec.scramVerifier).toMatch(/^SCRAM-SHA-256\$/);
  });

  it("sends an empty snapshot to an agent with nothing assigned", async () => {
    await registerAgent(h, "w-empty", { regions: ["fsn1"] });
    expect((await watch("w-empty").next()).instances).toEqual([]);
  });

  it("sends a new snapshot promptly after each change while the agent waits", async () => {
    await registerAgent(h, "w-live", { regions: ["fsn1"], ports: [61000, 61099], capacity: 1000 });
    const stream = watch("w-live");
    expect((await stream.next()).instances).toEqual([]);

    const afterCreate = stream.next();
    const { database } = await createDb(h, ORG, { region: "fsn1" });
    expect((await afterCreate).instances.map((i) => [i.databaseId, i.desiredState])).toEqual([[database!.id, DesiredState.RUNNING]]);

    // Reported running by hand (not through `report`, which would open a second stream).
    const afterRunning = stream.next();
    await h.agents.reportInstances({
      agentId: "w-live",
      instances: [{ databaseId: database!.id, state: ObservedState.RUNNING, observedGeneration: 1n, appliedCredentialsGeneration: 1n }],
    });
    // Its first run starts its first backup, which the agent is to take.
    expect((await afterRunning).instances[0]!.backupIds).toHaveLength(1);
    const afterStop = stream.next();
    await h.dbs.stopDatabase({ organizationId: ORG, id: database!.id });
    const stopped = (await afterStop).instances[0]!;
    expect(stopped).toMatchObject({ desiredState: DesiredState.STOPPED, generation: 2n });
  });

  // An agent is busy reconciling one snapshot before it asks for the next; what changed meanwhile
  // must come as soon as it asks, not with the periodic resend 15 s later.
  it("sends changes made while the agent was busy as soon as it asks for the next message", async () => {
    await registerAgent(h, "w-busy", { regions: ["nbg1"], ports: [62000, 62099], capacity: 1000 });
    const stream = watch("w-busy");
    expect((await stream.next()).instances).toEqual([]);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const notified = new Promise<void>((resolve) => {
        const off = h.ctx.feed.onAgent("w-busy", () => {
          off();
          resolve();
        });
      });
      ids.push((await createDb(h, ORG, { region: "nbg1" })).database!.id);
      await notified;
    }
    let latest = await stream.next(3000);
    while (latest.instances.length < ids.length) latest = await stream.next(3000);
    expect(latest.instances.map((i) => i.databaseId).sort()).toEqual([...ids].sort());
  });

  it("lets go of its change-feed subscription when the agent disconnects", async () => {
    await registerAgent(h, "w-gone", { regions: ["hel1"] });
    const counting = countingFeed(h.ctx.feed);
    const agents = h.agentsWith({ feed: counting.feed });
    for (let i = 0; i < 3; i++) {
      const abort = new AbortController();
      for await (const _ of agents.watchAssignments({ agentId: "w-gone" }, { signal: abort.signal })) break;
      abort.abort();
    }
    await eventually(async () => counting.active() === 0, 1000).catch(() => undefined);
    expect(counting.active()).toBe(0);
  });

  it("wakes only the stream of the agent whose instances changed", async () => {
    await registerAgent(h, "w-x", { regions: ["hel1"], ports: [63000, 63099], capacity: 1000 });
    await registerAgent(h, "w-quiet", { regions: ["fsn1"], capacity: 0 });
    const mine = watch("w-x");
    const other = watch("w-quiet");
    await mine.next();
    await other.next();
    const minePending = mine.next();
    const otherPending = other.next(600);
    // Most free capacity in hel1: w-x.
    const created = (await createDb(h, ORG, { region: "hel1" })).database!;
    expect((await minePending).instances.map((i) => i.databaseId)).toContain(created.id);
    await expect(otherPending).rejects.toThrow(/no watch message/);
  });
});
