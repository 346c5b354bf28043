import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { InstanceAdminService } from "@dbaas/proto/instance-admin";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { query, startHost, startInstance, type TestHost, type TestInstance } from "../support/fixture.ts";
import { adminClient } from "./support.ts";

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => "resolved",
    (e: unknown) => Code[ConnectError.from(e).code],
  );

describe("extensions inside a server", { timeout: 120_000 }, () => {
  let host: TestHost;
  let inst: TestInstance;
  let admin: Client<typeof InstanceAdminService>;
  const id = "ext1";

  beforeAll(async () => {
    host = await startHost("ext");
    inst = await startInstance(host, id);
    admin = adminClient(host.runtime);
  }, 120_000);

  afterAll(() => host?.close(), 60_000);

  it("lists what the binaries offer, with versions, trusted flags and what defaultdb has", async () => {
    const { extensions } = await admin.listExtensions({ databaseId: id, db: "" });
    const names = extensions.map((e) => e.name);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["pg_trgm", "pgcrypto", "pg_stat_statements", "plpython3u", "uuid-ossp"]));
    expect(extensions.find((e) => e.name === "plpgsql")).toMatchObject({ installedVersion: "1.0" });
    const trgm = extensions.find((e) => e.name === "pg_trgm")!;
    expect(trgm).toMatchObject({ installedVersion: "", trusted: true });
    expect(trgm.defaultVersion).toMatch(/^\d+\.\d+$/);
    expect(extensions.find((e) => e.name === "plpython3u")!.trusted).toBe(false);
  });

  it("installs as superuser in the logical database asked for; the customer uses it; drop refuses while depended on", async () => {
    const res = await admin.installExtension({ databaseId: id, db: "", name: "pg_trgm" });
    expect(res.extension).toMatchObject({ name: "pg_trgm", installedVersion: res.extension!.defaultVersion });
    expect(await query(inst.port, inst.password, "SELECT similarity('postgres', 'postgis') > 0.3 AS close")).toEqual([{ close: true }]);
    // Installing again changes nothing.
    await admin.installExtension({ databaseId: id, db: "", name: "pg_trgm" });
    await query(inst.port, inst.password, "CREATE TABLE words (w text); CREATE INDEX words_trgm ON words USING gin (w gin_trgm_ops)");
    expect(await codeOf(admin.dropExtension({ databaseId: id, db: "", name: "pg_trgm" }))).toBe("FailedPrecondition");
    await query(inst.port, inst.password, "DROP TABLE words");
    await admin.dropExtension({ databaseId: id, db: "", name: "pg_trgm" });
    expect((await admin.listExtensions({ databaseId: id, db: "" })).extensions.find((e) => e.name === "pg_trgm")!.installedVersion).toBe(
      "",
    );
    expect(await codeOf(admin.dropExtension({ databaseId: id, db: "", name: "pg_trgm" }))).toBe("NotFound");
  });

  it("names a logical database that does not exist, an extension that is not there, and refuses non-names", async () => {
    const err = await admin.listExtensions({ databaseId: id, db: "nowhere" }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).rawMessage).toBe("db: database nowhere does not exist");
    expect(await codeOf(admin.installExtension({ databaseId: id, db: "", name: "no_such_thing" }))).toBe("NotFound");
    expect(await codeOf(admin.installExtension({ databaseId: id, db: "", name: 'x"; DROP DATABASE defaultdb; --' }))).toBe(
      "InvalidArgument",
    );
  });
});
