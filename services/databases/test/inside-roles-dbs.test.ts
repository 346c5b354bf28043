import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { createLogger, startServer, type RunningServer } from "@dbaas/kit";
import { ErrorReasonSchema } from "@dbaas/proto/common";
import { ObservedState } from "@dbaas/proto/agent";
import { InsideService } from "@dbaas/proto/inside";
import { InstanceAdminService } from "@dbaas/proto/instance-admin";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { instanceAdmin } from "../../provisioner-agent/src/handlers/instance-admin.ts";
import { startHost, startInstance, type TestHost } from "../../provisioner-agent/test/support/fixture.ts";
import { routes } from "../src/routes.ts";
import { createDb, createHarness, expectCode, registerAgent, report, SECRET, violationsOf, type Harness } from "./harness.ts";

// InsideService on real servers: an agent's InstanceAdminService (its handlers over the local runtime, served
// over HTTP/2 with internal credentials, as the agent serves it) runs the instances of databases this service
// created; the harness plays the agent's reports.

const ORG = "org-inside";
const AGENT = "inside-agent";

let h: Harness;
let host: TestHost;
let agentServer: RunningServer;
let inside: Client<typeof InsideService>;

/** A database of ORG whose instance runs on the test host (its id is the instance's), reported running. */
async function runningDatabase(): Promise<{ id: string; port: number; password: string; published: number }> {
  const created = await createDb(h, ORG);
  const id = created.database!.id;
  // The instance is the test host's, started with a password of its own (dbadmin's, known to this test only).
  const inst = await startInstance(host, id);
  await report(h, AGENT, id, ObservedState.RUNNING);
  // `port` is where the test host serves it; `published`, the port the record was placed on.
  return { id, port: inst.port, password: inst.password, published: created.database!.port };
}

/** Logs in to the instance's published port as `user` over TLS (the harness's hosts do not resolve). */
async function login(port: number, user: string, password: string, database = "defaultdb"): Promise<pg.Client> {
  const c = new pg.Client({ host: "127.0.0.1", port, user, password, database, ssl: { rejectUnauthorized: false } });
  c.on("error", () => {});
  await c.connect();
  return c;
}

async function logsIn(port: number, user: string, password: string): Promise<boolean> {
  try {
    await (await login(port, user, password)).end();
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  h = await createHarness();
  host = await startHost("dbs-inside");
  agentServer = await startServer({
    port: 0,
    host: "127.0.0.1",
    internalSecret: SECRET,
    log: createLogger("agent-test"),
    routes: (router) => router.service(InstanceAdminService, instanceAdmin({ runtime: host.runtime, log: createLogger("agent-test") })),
  });
  await registerAgent(h, AGENT);
  await h.agents.registerAgent({ ...(await agentRow()), controlUrl: agentServer.url });
  inside = createClient(InsideService, createRouterTransport(routes(h.ctx)));
}, 120_000);

afterAll(async () => {
  await agentServer?.close();
  await host?.close();
  await h?.close();
}, 60_000);

/** The registration the harness made, to register again with a control URL. */
async function agentRow() {
  const { rows } = await h.ctx.pool.query("SELECT * FROM agents WHERE id = $1", [AGENT]);
  const a = rows[0];
  return {
    agentId: AGENT,
    regions: a.regions,
    capacity: a.capacity,
    portRangeStart: a.port_range_start,
    portRangeEnd: a.port_range_end,
    versions: a.versions,
    caCertificatePem: a.ca_certificate_pem,
    publicAddresses: a.public_addresses,
  };
}

describe("roles", { timeout: 120_000 }, () => {
  let db: Awaited<ReturnType<typeof runningDatabase>>;
  beforeAll(async () => {
    db = await runningDatabase();
  }, 120_000);

  it("creates a role whose password (shown once) logs in, and lists it with its creation time beside dbadmin", async () => {
    const res = await inside.createRole({ organizationId: ORG, databaseId: db.id, name: "bi_reader" });
    expect(res.role).toMatchObject({ name: "bi_reader", login: true, createDb: false, createRole: false, builtin: false });
    expect(res.role!.createdAt).toBeDefined();
    expect(res.password).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(res.connectionString).toBe(`postgresql://bi_reader:${res.password}@${db.id}.db.test:${db.published}/defaultdb?sslmode=require`);
    const c = await login(db.port, "bi_reader", res.password);
    try {
      await expect(c.query("ALTER ROLE bi_reader SUPERUSER")).rejects.toThrow(/permission denied|must be superuser/i);
    } finally {
      await c.end();
    }
    const { roles, total } = await inside.listRoles({ organizationId: ORG, databaseId: db.id });
    expect(roles.map((r) => r.name)).toEqual(["bi_reader", "dbadmin"]);
    expect(total).toBe(2);
    expect(roles[1]).toMatchObject({ name: "dbadmin", builtin: true, createDb: true, createRole: true });
    expect(roles[1]!.createdAt).toBeUndefined();
    // The control plane keeps no password and no verifier of the role.
    const { rows } = await h.ctx.pool.query("SELECT * FROM database_roles WHERE database_id = $1", [db.id]);
    expect(rows.map((r) => r.name)).toEqual(["bi_reader"]);
    expect(JSON.stringify(rows)).not.toContain(res.password);
    expect(JSON.stringify(rows)).not.toContain("SCRAM");
    expect(h.logs.join("\n")).not.toContain(res.password);
  });

  it("refuses names that are not plain identifiers (422 naming the field) and taken ones (409)", async () => {
    for (const name of ["Bad", "1abc", "a-b", "pg_role", "dbaas_x", "public", "", "x".repeat(64)]) {
      const err = await expectCode(inside.createRole({ organizationId: ORG, databaseId: db.id, name }), Code.InvalidArgument);
      expect(violationsOf(err).map((v) => v.field)).toEqual(["name"]);
    }
    await expectCode(inside.createRole({ organizationId: ORG, databaseId: db.id, name: "bi_reader" }), Code.AlreadyExists);
    await expectCode(inside.createRole({ organizationId: ORG, databaseId: db.id, name: "dbadmin" }), Code.AlreadyExists);
  });

  it("resets a role's password: the old one and its sessions end, the new one logs in", async () => {
    const made = await inside.createRole({ organizationId: ORG, databaseId: db.id, name: "rotated" });
    const open = await login(db.port, "rotated", made.password);
    const ended = new Promise<Error>((resolve) => open.once("error", resolve));
    const reset = await inside.resetRolePassword({ organizationId: ORG, databaseId: db.id, name: "rotated" });
    expect(reset.password).not.toBe(made.password);
    expect(reset.role).toMatchObject({ name: "rotated", login: true });
    expect((await ended).message).toMatch(/terminat/i);
    await open.end().catch(() => {});
    expect(await logsIn(db.port, "rotated", made.password)).toBe(false);
    expect(await logsIn(db.port, "rotated", reset.password)).toBe(true);
    await expectCode(inside.resetRolePassword({ organizationId: ORG, databaseId: db.id, name: "no_such_role" }), Code.NotFound);
  });

  it("deletes a role (it no longer logs in); dbadmin cannot go; an unknown one is 404", async () => {
    const made = await inside.createRole({ organizationId: ORG, databaseId: db.id, name: "short_lived" });
    await inside.deleteRole({ organizationId: ORG, databaseId: db.id, name: "short_lived" });
    expect(await logsIn(db.port, "short_lived", made.password)).toBe(false);
    expect((await inside.listRoles({ organizationId: ORG, databaseId: db.id })).roles.map((r) => r.name)).not.toContain("short_lived");
    const own = await expectCode(inside.deleteRole({ organizationId: ORG, databaseId: db.id, name: "dbadmin" }), Code.FailedPrecondition);
    expect(own.rawMessage).toContain("cannot be deleted");
    await expectCode(inside.deleteRole({ organizationId: ORG, databaseId: db.id, name: "short_lived" }), Code.NotFound);
    await expectCode(inside.deleteRole({ organizationId: ORG, databaseId: db.id, name: "Not-A-Name" }), Code.NotFound);
  });

  it("holds at most 50 roles (dbadmin and roles made in SQL count)", async () => {
    const { total } = await inside.listRoles({ organizationId: ORG, databaseId: db.id });
    for (let i = total; i < 50; i++) await inside.createRole({ organizationId: ORG, databaseId: db.id, name: `filler_${i}` });
    const err = await expectCode(inside.createRole({ organizationId: ORG, databaseId: db.id, name: "one_more" }), Code.FailedPrecondition);
    expect(err.rawMessage).toContain("at most 50");
    const page2 = await inside.listRoles({ organizationId: ORG, databaseId: db.id, page: 2, perPage: 20 });
    expect(page2.total).toBe(50);
    expect(page2.roles).toHaveLength(20);
  });
});

describe("logical databases", { timeout: 120_000 }, () => {
  let db: Awaited<ReturnType<typeof runningDatabase>>;
  beforeAll(async () => {
    db = await runningDatabase();
  }, 120_000);

  it("creates a second database, reachable, owned by a role; lists and deletes it", async () => {
    const role = await inside.createRole({ organizationId: ORG, databaseId: db.id, name: "app" });
    const res = await inside.createDb({ organizationId: ORG, databaseId: db.id, name: "app_data", owner: "app" });
    expect(res.db).toMatchObject({ name: "app_data", owner: "app", builtin: false });
    const c = await login(db.port, "app", role.password, "app_data");
    await c.query("CREATE TABLE t (x int)");
    await c.end();
    const dflt = await inside.createDb({ organizationId: ORG, databaseId: db.id, name: "reports", owner: "" });
    expect(dflt.db!.owner).toBe("dbadmin");
    const { dbs, total } = await inside.listDbs({ organizationId: ORG, databaseId: db.id });
    expect(dbs.map((d) => d.name)).toEqual(["app_data", "defaultdb", "reports"]);
    expect(total).toBe(3);
    expect(dbs.find((d) => d.name === "defaultdb")).toMatchObject({ builtin: true, owner: "dbadmin" });
    await inside.deleteDb({ organizationId: ORG, databaseId: db.id, name: "reports" });
    expect((await inside.listDbs({ organizationId: ORG, databaseId: db.id })).dbs.map((d) => d.name)).toEqual(["app_data", "defaultdb"]);
  });

  it("refuses a bad name or owner (422 naming the field), a taken name (409), defaultdb's deletion and one with connections (409)", async () => {
    for (const name of ["postgres", "template1", "Caps", "pg_x"]) {
      const err = await expectCode(inside.createDb({ organizationId: ORG, databaseId: db.id, name, owner: "" }), Code.InvalidArgument);
      expect(violationsOf(err).map((v) => v.field)).toEqual(["name"]);
    }
    const owner = await expectCode(
      inside.createDb({ organizationId: ORG, databaseId: db.id, name: "x1", owner: "ghost" }),
      Code.InvalidArgument,
    );
    expect(violationsOf(owner)).toEqual([{ field: "owner", message: "no role ghost exists in the database" }]);
    await expectCode(inside.createDb({ organizationId: ORG, databaseId: db.id, name: "app_data", owner: "" }), Code.AlreadyExists);
    await expectCode(inside.deleteDb({ organizationId: ORG, databaseId: db.id, name: "defaultdb" }), Code.FailedPrecondition);
    const open = await login(db.port, "dbadmin", db.password, "app_data");
    try {
      const busy = await expectCode(inside.deleteDb({ organizationId: ORG, databaseId: db.id, name: "app_data" }), Code.FailedPrecondition);
      expect(busy.rawMessage).toContain("1 open connection");
    } finally {
      await open.end();
    }
    await expectCode(inside.deleteDb({ organizationId: ORG, databaseId: db.id, name: "never_made" }), Code.NotFound);
  });
});

describe("extensions", { timeout: 120_000 }, () => {
  let db: Awaited<ReturnType<typeof runningDatabase>>;
  beforeAll(async () => {
    db = await runningDatabase();
  }, 120_000);

  it("lists what the binaries offer, marks the allowlist, installs pg_trgm and removes it", async () => {
    const before = await inside.listExtensions({ organizationId: ORG, databaseId: db.id, perPage: 100 });
    expect(before.total).toBeGreaterThan(40);
    const trgm = before.extensions.find((e) => e.name === "pg_trgm")!;
    expect(trgm).toMatchObject({ installed: false, installedVersion: "", trusted: true, allowed: true });
    expect(before.extensions.find((e) => e.name === "plpython3u")).toMatchObject({ allowed: false, trusted: false });
    const made = await inside.installExtension({ organizationId: ORG, databaseId: db.id, name: "pg_trgm", db: "" });
    expect(made.extension).toMatchObject({ name: "pg_trgm", installed: true, installedVersion: trgm.defaultVersion });
    const c = await login(db.port, "dbadmin", db.password);
    try {
      expect((await c.query("SELECT similarity('postgres', 'postgis') > 0.3 AS close")).rows).toEqual([{ close: true }]);
      await c.query("CREATE TABLE w (t text); CREATE INDEX w_trgm ON w USING gin (t gin_trgm_ops)");
      const busy = await expectCode(
        inside.deleteExtension({ organizationId: ORG, databaseId: db.id, name: "pg_trgm", db: "" }),
        Code.FailedPrecondition,
      );
      expect(busy.rawMessage).toContain("depend");
      await c.query("DROP TABLE w");
    } finally {
      await c.end();
    }
    await inside.deleteExtension({ organizationId: ORG, databaseId: db.id, name: "pg_trgm", db: "" });
    await expectCode(inside.deleteExtension({ organizationId: ORG, databaseId: db.id, name: "pg_trgm", db: "" }), Code.NotFound);
  });

  it("refuses an extension off the allowlist (422 on name) and a logical database that does not exist (422 on db)", async () => {
    for (const name of ["plpython3u", "dblink", "file_fdw", "adminpack", "no_such_thing"]) {
      const err = await expectCode(inside.installExtension({ organizationId: ORG, databaseId: db.id, name, db: "" }), Code.InvalidArgument);
      expect(violationsOf(err).map((v) => v.field)).toEqual(["name"]);
    }
    const err = await expectCode(
      inside.installExtension({ organizationId: ORG, databaseId: db.id, name: "citext", db: "nowhere" }),
      Code.InvalidArgument,
    );
    expect(violationsOf(err)).toEqual([{ field: "db", message: "database nowhere does not exist" }]);
    await inside.createDb({ organizationId: ORG, databaseId: db.id, name: "other", owner: "" });
    await inside.installExtension({ organizationId: ORG, databaseId: db.id, name: "citext", db: "other" });
    const other = await inside.listExtensions({ organizationId: ORG, databaseId: db.id, db: "other", perPage: 100 });
    expect(other.extensions.find((e) => e.name === "citext")!.installed).toBe(true);
    const dflt = await inside.listExtensions({ organizationId: ORG, databaseId: db.id, perPage: 100 });
    expect(dflt.extensions.find((e) => e.name === "citext")!.installed).toBe(false);
  });
});

describe("what every call checks first", { timeout: 120_000 }, () => {
  it("another organization's database is 404; one that is not running is 409 naming its status", async () => {
    const created = await createDb(h, ORG);
    await expectCode(inside.listRoles({ organizationId: "org-other", databaseId: created.database!.id }), Code.NotFound);
    const err = await expectCode(inside.listRoles({ organizationId: ORG, databaseId: created.database!.id }), Code.FailedPrecondition);
    expect(err.rawMessage).toBe("the database is provisioning: roles can be managed only while it is running");
    await expectCode(inside.createDb({ organizationId: ORG, databaseId: "db-missing", name: "x", owner: "" }), Code.NotFound);
  });

  it("an agent that cannot be reached is 503 (service_unavailable), never a 500", async () => {
    const db = await runningDatabase();
    await h.ctx.pool.query("UPDATE agents SET control_url = 'http://127.0.0.1:1' WHERE id = $1", [AGENT]);
    try {
      const err = await expectCode(inside.listRoles({ organizationId: ORG, databaseId: db.id }), Code.Aborted);
      expect(err.findDetails(ErrorReasonSchema)[0]?.code).toBe("service_unavailable");
    } finally {
      await h.ctx.pool.query("UPDATE agents SET control_url = $2 WHERE id = $1", [AGENT, agentServer.url]);
    }
  });
});
