import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { InstanceAdminService } from "@dbaas/proto/instance-admin";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { query, startHost, startInstance, type TestHost, type TestInstance, waitFor } from "../support/fixture.ts";
import { adminClient } from "./support.ts";

// The agent keeps its superuser sessions on a server between the calls inside it (admin-sessions.ts): the
// calls of InstanceAdminService and a configuration's apply reuse them instead of starting a backend each,
// a restart or a stop of the server leaves no call failing once it runs again, a session the server ended is
// replaced, and a kept session in a customer's database does not stop that database from being dropped.

const ADMIN = "dbaas-agent-admin";

interface Backend {
  pid: number;
  datname: string;
  backend_start: string;
}

describe("the agent's kept sessions on a server", { timeout: 240_000 }, () => {
  let host: TestHost;
  let inst: TestInstance;
  let admin: Client<typeof InstanceAdminService>;
  const id = "sessions1";

  /** The agent's admin sessions on the server now, as another session sees them. */
  const adminBackends = async (): Promise<Backend[]> =>
    (await host.asAgent(
      id,
      `SELECT pid, datname, backend_start::text FROM pg_stat_activity WHERE application_name = '${ADMIN}' ORDER BY pid`,
    )) as unknown as Backend[];

  /** One call of each kind that opened a session of its own before. */
  const calls = (i: number) => [
    () => admin.listRoles({ databaseId: id }),
    () => admin.listDbs({ databaseId: id }),
    () => admin.listQueryStats({ databaseId: id, orderBy: "calls", limit: 10 }),
    () => admin.listExtensions({ databaseId: id, db: "" }),
    () => host.runtime.setParameters(id, { work_mem: `${8 + i}MB` }),
  ];

  beforeAll(async () => {
    host = await startHost("sessions");
    inst = await startInstance(host, id);
    admin = adminClient(host.runtime);
  }, 120_000);

  afterAll(() => host?.close(), 60_000);

  it("reuses one backend in postgres for roles, databases, query insights and configuration, call after call", async () => {
    const seen = new Map<number, string>();
    for (let i = 0; i < 6; i++) {
      for (const call of calls(i)) {
        await call();
        const postgres = (await adminBackends()).filter((b) => b.datname === "postgres");
        // Kept after the call (each call closed its session before), never more than the limit.
        expect(postgres.length).toBe(1);
        for (const b of postgres) seen.set(b.pid, b.backend_start);
      }
      // The configuration is the server's: a new customer session sees it.
      expect((await query(inst.port, inst.password, "SHOW work_mem"))[0]!.work_mem).toBe(`${8 + i}MB`);
    }
    // 30 calls, one backend started for them in postgres.
    expect([...seen.keys()]).toHaveLength(1);
    expect((await adminBackends()).length).toBeLessThanOrEqual(2);
  });

  it("a restart leaves no call failing: the next call opens a session on the new server", async () => {
    const before = (await adminBackends()).map((b) => b.pid);
    expect(before.length).toBeGreaterThan(0);
    await host.runtime.restart(id, inst.settings);
    for (const call of calls(20)) await call();
    const after = (await adminBackends()).map((b) => b.pid);
    expect(after.length).toBeGreaterThan(0);
    for (const pid of after) expect(before).not.toContain(pid);
    expect((await query(inst.port, inst.password, "SHOW work_mem"))[0]!.work_mem).toBe("28MB");
  });

  it("a stopped server answers FAILED_PRECONDITION, and once started again every call works", async () => {
    await host.runtime.stop(id);
    const err = await admin.listRoles({ databaseId: id }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err && Code[err.code]).toBe("FailedPrecondition");
    await host.runtime.start(id, inst.settings);
    for (const call of calls(21)) await call();
    expect((await adminBackends()).length).toBeGreaterThan(0);
  });

  it("a session the server ended is replaced by the next call, which does not fail", async () => {
    await admin.listRoles({ databaseId: id });
    const [victim] = (await adminBackends()).filter((b) => b.datname === "postgres");
    expect(victim).toBeDefined();
    // Ended by someone else (a superuser's pg_terminate_backend), waited for until it has exited.
    expect(await host.asAgent(id, `SELECT pg_terminate_backend(${victim!.pid}, 10000) AS ok`)).toEqual([{ ok: true }]);
    for (const call of calls(22)) await call();
    const now = (await adminBackends()).filter((b) => b.datname === "postgres");
    expect(now).toHaveLength(1);
    expect(now[0]!.pid).not.toBe(victim!.pid);
  });

  it("a kept session in a customer's database does not stop the API from dropping it", async () => {
    await admin.createDb({ databaseId: id, name: "kept_db", owner: "dbadmin", maxDbs: 0 });
    await admin.listExtensions({ databaseId: id, db: "kept_db" });
    expect((await adminBackends()).some((b) => b.datname === "kept_db")).toBe(true);
    await admin.dropDb({ databaseId: id, name: "kept_db" });
    expect((await admin.listDbs({ databaseId: id })).dbs.map((d) => d.name)).not.toContain("kept_db");
  });

  it("an idle session in a customer's database is closed within seconds (a customer's DROP DATABASE waits 5 s for it)", async () => {
    await admin.listExtensions({ databaseId: id, db: "" });
    expect((await adminBackends()).some((b) => b.datname === "defaultdb")).toBe(true);
    await waitFor(async () => !(await adminBackends()).some((b) => b.datname === "defaultdb"), 30_000, "the idle defaultdb session closed");
  });
});
