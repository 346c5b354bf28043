import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { InstanceAdminService } from "@dbaas/proto/instance-admin";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverLogRoot } from "../../src/instances/host.ts";
import {
  connect,
  query,
  randomPassword,
  scramVerifier,
  startHost,
  startInstance,
  type TestHost,
  type TestInstance,
} from "../support/fixture.ts";
import { adminClient } from "./support.ts";

/** The Connect code a call failed with (fails the test when it succeeded). */
async function codeOf(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  expect(err, "call should have failed").toBeDefined();
  return { code: Code[err!.code], message: err!.rawMessage };
}

/** Whether `user` logs in to defaultdb with `password` (over TLS, as a customer). */
async function logsIn(port: number, user: string, password: string): Promise<boolean> {
  try {
    await (await connect(port, password, { user })).end();
    return true;
  } catch {
    return false;
  }
}

/** A customer's session on logical database `database` (the fixture's connect goes to defaultdb). */
async function session(port: number, user: string, password: string, database: string): Promise<pg.Client> {
  const c = new pg.Client({ host: "127.0.0.1", port, user, password, database, ssl: { rejectUnauthorized: false } });
  c.on("error", () => {});
  await c.connect();
  return c;
}

describe("roles and logical databases inside a server", { timeout: 120_000 }, () => {
  let host: TestHost;
  let inst: TestInstance;
  let admin: Client<typeof InstanceAdminService>;
  const id = "inside1";
  const verifiers: string[] = [];

  beforeAll(async () => {
    host = await startHost("inside");
    inst = await startInstance(host, id);
    admin = adminClient(host.runtime);
  }, 120_000);

  afterAll(() => host?.close(), 60_000);

  const newRole = async (name: string, maxRoles = 50) => {
    const password = randomPassword();
    const verifier = scramVerifier(password);
    verifiers.push(verifier);
    const res = await admin.createRole({ databaseId: id, name, scramVerifier: verifier, maxRoles });
    return { password, role: res.role! };
  };

  it("creates a LOGIN role that is never superuser, replication or bypassrls, and it logs in with its password", async () => {
    const { password, role } = await newRole("reporting");
    expect(role).toMatchObject({ name: "reporting", login: true, createDb: false, createRole: false });
    const rows = await host.asAgent(
      id,
      "SELECT rolsuper, rolreplication, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = 'reporting'",
    );
    expect(rows).toEqual([{ rolsuper: false, rolreplication: false, rolbypassrls: false, rolcanlogin: true }]);
    const c = await connect(inst.port, password, { user: "reporting" });
    try {
      expect((await c.query("SELECT current_user AS u")).rows).toEqual([{ u: "reporting" }]);
      for (const attr of ["SUPERUSER", "REPLICATION", "BYPASSRLS"]) {
        await expect(c.query(`ALTER ROLE reporting ${attr}`)).rejects.toThrow(/permission denied|must be superuser|must have/i);
      }
    } finally {
      await c.end();
    }
    expect(await logsIn(inst.port, "reporting", randomPassword())).toBe(false);
  });

  it("lets dbadmin administer the role (ADMIN OPTION) without becoming it", async () => {
    await query(inst.port, inst.password, "ALTER ROLE reporting CONNECTION LIMIT 7");
    await expect(query(inst.port, inst.password, "SET ROLE reporting")).rejects.toThrow(/permission denied/);
    const rows = await host.asAgent(id, "SELECT rolconnlimit FROM pg_roles WHERE rolname = 'reporting'");
    expect(rows).toEqual([{ rolconnlimit: 7 }]);
  });

  it("lists the customer's roles, dbadmin included, never the agent's or the replication role", async () => {
    await query(inst.port, inst.password, "CREATE ROLE made_in_sql NOLOGIN");
    const { roles } = await admin.listRoles({ databaseId: id });
    const names = roles.map((r) => r.name);
    expect(names).toEqual([...names].sort());
    expect(names).toContain("dbadmin");
    expect(names).toContain("reporting");
    expect(roles.find((r) => r.name === "made_in_sql")).toMatchObject({ login: false });
    const all = (await host.asAgent(id, "SELECT rolname FROM pg_roles WHERE rolsuper OR rolreplication")).map((r) => r.rolname as string);
    expect(all.length).toBeGreaterThan(0);
    for (const n of all) expect(names).not.toContain(n);
    expect(names.some((n) => n.startsWith("pg_"))).toBe(false);
  });

  it("refuses a taken name, a name that is not a plain identifier, and more than max_roles", async () => {
    expect((await codeOf(newRole("reporting"))).code).toBe("AlreadyExists");
    expect((await codeOf(newRole("dbadmin"))).code).toBe("AlreadyExists");
    expect((await codeOf(newRole('x"; DROP ROLE dbadmin; --'))).code).toBe("InvalidArgument");
    expect((await codeOf(newRole("pg_evil"))).code).toBe("InvalidArgument");
    // Anything but a well-formed verifier would be stored as a password in clear.
    for (const scramVerifier of ["plaintext-password", "SCRAM-SHA-256$4096:c2FsdA==$short:short"]) {
      expect((await codeOf(admin.createRole({ databaseId: id, name: "clear", scramVerifier, maxRoles: 50 }))).code).toBe("InvalidArgument");
    }
    const { roles } = await admin.listRoles({ databaseId: id });
    const refused = await codeOf(newRole("one_too_many", roles.length));
    expect(refused.code).toBe("FailedPrecondition");
    expect(refused.message).toContain(`at most ${roles.length}`);
  });

  it("a new password ends the role's open sessions and the old password stops working", async () => {
    const { password } = await newRole("rotating");
    const open = await connect(inst.port, password, { user: "rotating" });
    const ended = new Promise<Error>((resolve) => open.once("error", resolve));
    const next = randomPassword();
    const verifier = scramVerifier(next);
    verifiers.push(verifier);
    const res = await admin.setRolePassword({ databaseId: id, name: "rotating", scramVerifier: verifier });
    expect(res.sessionsEnded).toBe(1);
    expect(res.walLsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect((await ended).message).toMatch(/terminat/i);
    await open.end().catch(() => {});
    expect(await logsIn(inst.port, "rotating", password)).toBe(false);
    expect(await logsIn(inst.port, "rotating", next)).toBe(true);
    // On a primary (not a standby) ending sessions does not wait for any replay.
    expect((await admin.endRoleSessions({ databaseId: id, name: "rotating", walLsn: res.walLsn })).sessionsEnded).toBe(0);
  });

  it("never touches roles that are not the customer's", async () => {
    const agentRoles = (await host.asAgent(id, "SELECT rolname FROM pg_roles WHERE rolsuper OR rolreplication")).map(
      (r) => r.rolname as string,
    );
    for (const name of agentRoles.filter((n) => /^[a-z_][a-z0-9_]*$/.test(n))) {
      expect((await codeOf(admin.dropRole({ databaseId: id, name }))).code).toBe("NotFound");
      expect((await codeOf(admin.setRolePassword({ databaseId: id, name, scramVerifier: scramVerifier(randomPassword()) }))).code).toBe(
        "NotFound",
      );
    }
    expect((await codeOf(admin.dropRole({ databaseId: id, name: "nobody_here" }))).code).toBe("NotFound");
  });

  it("creates logical databases owned by a role, lists them (not postgres, not templates) and drops them", async () => {
    const { password } = await newRole("app_owner");
    const res = await admin.createDb({ databaseId: id, name: "analytics", owner: "app_owner", maxDbs: 50 });
    expect(res.db).toMatchObject({ name: "analytics", owner: "app_owner" });
    expect(res.db!.sizeBytes).toBeGreaterThan(0n);
    await (await session(inst.port, "app_owner", password, "analytics")).end();
    const { dbs } = await admin.listDbs({ databaseId: id });
    expect(dbs.map((d) => d.name)).toEqual(["analytics", "defaultdb"]);
    expect(dbs.find((d) => d.name === "defaultdb")!.owner).toBe("dbadmin");
    expect((await codeOf(admin.createDb({ databaseId: id, name: "analytics", owner: "dbadmin", maxDbs: 50 }))).code).toBe("AlreadyExists");
    expect((await codeOf(admin.createDb({ databaseId: id, name: "other", owner: "no_such_role", maxDbs: 50 }))).code).toBe(
      "InvalidArgument",
    );
    expect((await codeOf(admin.createDb({ databaseId: id, name: "third", owner: "dbadmin", maxDbs: 2 }))).code).toBe("FailedPrecondition");
    expect((await codeOf(admin.dropDb({ databaseId: id, name: "postgres" }))).code).toBe("NotFound");
  });

  it("refuses to drop a database with connections, and a role that owns objects, saying why", async () => {
    const open = await session(inst.port, "dbadmin", inst.password, "analytics");
    try {
      const busy = await codeOf(admin.dropDb({ databaseId: id, name: "analytics" }));
      expect(busy.code).toBe("FailedPrecondition");
      expect(busy.message).toMatch(/1 open connection/);
    } finally {
      await open.end();
    }
    await admin.dropDb({ databaseId: id, name: "analytics" });
    expect((await admin.listDbs({ databaseId: id })).dbs.map((d) => d.name)).toEqual(["defaultdb"]);

    const { password } = await newRole("owns_things");
    await query(inst.port, inst.password, "GRANT CREATE ON SCHEMA public TO owns_things");
    const owner = await connect(inst.port, password, { user: "owns_things" });
    await owner.query("CREATE TABLE owned_by_role (x int)");
    await owner.end();
    const refused = await codeOf(admin.dropRole({ databaseId: id, name: "owns_things" }));
    expect(refused.code).toBe("FailedPrecondition");
    expect(refused.message).toMatch(/depend on it: .*in database defaultdb.*REASSIGN OWNED BY owns_things/);
    await query(inst.port, inst.password, "DROP TABLE owned_by_role; REVOKE CREATE ON SCHEMA public FROM owns_things");
    await admin.dropRole({ databaseId: id, name: "owns_things" });
    expect(await logsIn(inst.port, "owns_things", password)).toBe(false);
  });

  it("writes no verifier to the server's log, not even for a statement that failed", async () => {
    // The server logs as jsonlog into its own directory (server-log/); start-up lines still go to logPath.
    const dir = path.join(serverLogRoot(host.dataDir), id);
    const files = (await readdir(dir)).map((f) => path.join(dir, f));
    const log = (await Promise.all([host.m.logPath(id), ...files].map((f) => readFile(f, "utf8").catch(() => "")))).join("");
    expect(log).toContain("already exists");
    for (const v of verifiers) expect(log).not.toContain(v.split("$")[2]!);
  });

  it("answers FAILED_PRECONDITION for a server that does not run here", async () => {
    expect((await codeOf(admin.listRoles({ databaseId: "not-here" }))).code).toBe("FailedPrecondition");
    await host.runtime.stop(id);
    expect((await codeOf(admin.listDbs({ databaseId: id }))).code).toBe("FailedPrecondition");
  });
});
