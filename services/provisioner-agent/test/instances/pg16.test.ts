import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findServerBinaries } from "../../src/instances/binaries.ts";
import type { InstanceManager } from "../../src/instances/instance-manager.ts";
import { connect, startHost, startInstance, type TestHost } from "../support/fixture.ts";

describe("PostgreSQL 16 instances", { timeout: 60_000 }, () => {
  let host: TestHost;
  let m: InstanceManager;
  let port: number;
  let password: string;
  const hostname = "db16.example.test";

  beforeAll(async () => {
    host = await startHost("pg16");
    m = host.m;
    ({ port, password } = await startInstance(host, "v16", { major: "16", hostname }));
  }, 60_000);

  afterAll(() => host?.close(), 60_000);

  it("both majors are installed", () => {
    expect([...findServerBinaries().keys()].sort()).toEqual(["16", "17"]);
    expect(m.availableMajors).toEqual(["16", "17"]);
  });

  it("runs 16.x with verify-full TLS and SCRAM", async () => {
    const c = await connect(port, password, { ssl: { ca: await m.caCertificatePem(), servername: hostname } });
    try {
      const { rows } = await c.query("SHOW server_version");
      expect(String(rows[0].server_version)).toMatch(/^16\./);
    } finally {
      await c.end();
    }
  });

  it("stops cleanly", async () => {
    await m.stop("v16");
    expect(await m.observe("v16")).toEqual({ state: "stopped" });
  });
});
