import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createInternalClient, startServer, type RunningServer } from "@dbaas/kit";
import { AgentService, ObservedState, type WatchAssignmentsResponse } from "@dbaas/proto/agent";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { DatabasesService } from "@dbaas/proto/databases";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes } from "../src/routes.ts";
import { CA_PEM, SECRET, countingFeed, createHarness, eventually, type Harness } from "./harness.ts";

let h: Harness;
let server: RunningServer;
let feed: ReturnType<typeof countingFeed>;

beforeAll(async () => {
  h = await createHarness();
  feed = countingFeed(h.ctx.feed);
  server = await startServer({
    port: 0,
    routes: routes({ ...h.ctx, feed: feed.feed }),
    internalSecret: SECRET,
    log: h.ctx.log,
  });
});

afterAll(async () => {
  await server?.close();
  await h?.close();
});

const client = <S extends typeof DatabasesService | typeof AgentService>(service: S, caller: string) =>
  createInternalClient(service, server.url, { secret: SECRET, caller });

describe("databases over HTTP/2", () => {
  it("serves an agent and a caller end to end through internal clients", async () => {
    const agent = client(AgentService, "provisioner-agent");
    const gateway = client(DatabasesService, "gateway");
    await agent.registerAgent({
      agentId: "wire-agent",
      regions: ["fsn1"],
      capacity: 3,
      portRangeStart: 45000,
      portRangeEnd: 45010,
      versions: ["17"],
      caCertificatePem: CA_PEM,
    });

    const abort = new AbortController();
    const stream = agent.watchAssignments({ agentId: "wire-agent" }, { signal: abort.signal })[Symbol.asyncIterator]();
    const next = async (): Promise<WatchAssignmentsResponse> => {
      const r = await stream.next();
      if (r.done) throw new Error("watch stream ended");
      return r.value;
    };
    expect((await next()).instances).toEqual([]);

    const created = await gateway.createDatabase({ organizationId: "org-wire", name: "wire-db", region: "fsn1", tier: "micro" });
    const id = created.database!.id;
    const assigned = await next();
    expect(assigned.instances.map((i) => i.databaseId)).toEqual([id]);

    await agent.reportInstances({
      agentId: "wire-agent",
      instances: [{ databaseId: id, state: ObservedState.RUNNING, observedGeneration: 1n, appliedCredentialsGeneration: 1n }],
    });
    expect((await gateway.getDatabase({ organizationId: "org-wire", id })).database!.status).toBe("running");

    abort.abort();
    // A disconnected agent's stream gives back what it held.
    await eventually(async () => feed.active() === 0, 2000);

    await gateway.deleteDatabase({ organizationId: "org-wire", id });
    const refused = await gateway.restoreDatabase({ id }).catch((e: unknown) => ConnectError.from(e));
    expect((refused as ConnectError).code).toBe(Code.PermissionDenied);
    const restored = await client(DatabasesService, "support").restoreDatabase({ id });
    expect(restored.database).toMatchObject({ id, status: "starting" });
  });

  it("refuses a call without a valid internal credential", async () => {
    const bare = createClient(DatabasesService, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
    const err = await bare.listRegions({}).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);

    const forged = createInternalClient(DatabasesService, server.url, { secret: "not-the-secret", caller: "support", retries: 0 });
    const forgedErr = await forged.restoreDatabase({ id: "db-x" }).catch((e: unknown) => ConnectError.from(e));
    expect((forgedErr as ConnectError).code).toBe(Code.Unauthenticated);

    expect((await client(DatabasesService, "gateway").listRegions({})).regions).toHaveLength(3);
  });

  // PostgreSQL refuses NUL in text: each of these was a 500 (or failed a whole batch) before the kit's guard.
  it("answers NUL in an id with NOT_FOUND and in a name with INVALID_ARGUMENT; a batch answers such an item alone", async () => {
    const gateway = client(DatabasesService, "gateway");
    const code = (p: Promise<unknown>) =>
      p.then(
        () => "OK",
        (e: unknown) => Code[ConnectError.from(e).code],
      );
    expect(await code(gateway.deleteDatabase({ organizationId: "org-wire-nul", id: "db-x\u0000" }))).toBe("NotFound");
    expect(await code(gateway.startDatabase({ organizationId: "org-wire-nul", id: "\u0000" }))).toBe("NotFound");
    expect(await code(gateway.listOperations({ organizationId: "org-wire-nul", databaseId: "db\u0000" }))).toBe("NotFound");
    const named = await gateway
      .createDatabase({ organizationId: "org-wire-nul", name: "a\u0000bc", region: "fsn1", tier: "micro" })
      .catch((e: unknown) => ConnectError.from(e));
    expect((named as ConnectError).code).toBe(Code.InvalidArgument);
    expect((named as ConnectError).findDetails(FieldViolationSchema).map((v) => v.field)).toEqual(["name"]);

    const { database } = await gateway.createDatabase({
      organizationId: "org-wire-nul",
      name: "beside-a-nul",
      region: "fsn1",
      tier: "micro",
    });
    const batch = await gateway.batchGetDatabases({
      requests: [
        { organizationId: "org-wire-nul", id: `${database!.id}\u0000` },
        { organizationId: "org-wire-nul", id: database!.id },
      ],
    });
    expect(batch.results.map((r) => (r.result.case === "database" ? r.result.value.id : Code[r.result.value!.code]))).toEqual([
      "NotFound",
      database!.id,
    ]);
  });
});
