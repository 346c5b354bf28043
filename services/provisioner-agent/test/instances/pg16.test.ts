import { rm } from "node:fs/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findServerBinaries } from "../../src/instances/binaries.ts";
import { createInstanceManager, type InstanceManager } from "../../src/instances/instance-manager.ts";
import { freePort, randomPassword, scramVerifier, tempDataDir } from "./helpers.ts";

describe("PostgreSQL 16 instances", { timeout: 60_000 }, () => {
  let dataDir: string;
  let m: InstanceManager;
  let port: number;
  const password = randomPassword();
  const hostname = "db16.example.test";

  beforeAll(async () => {
    dataDir = await tempDataDir("pg16");
    m = createInstanceManager({ dataDir, agentId: "test-pg16" });
    port = await freePort();
    await m.provision("v16", { major: "16" });
    await m.start("v16", { port, tier: "micro", hostname, scramVerifier: scramVerifier(password) });
  }, 60_000);

  afterAll(async () => {
    await m?.stopAll();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    if (m) await rm(m.socketDir, { recursive: true, force: true });
  }, 60_000);

  it("both majors are installed", () => {
    expect([...findServerBinaries().keys()].sort()).toEqual(["16", "17"]);
    expect(m.availableMajors).toEqual(["16", "17"]);
  });

  it("runs 16.x with verify-full TLS and SCRAM", async () => {
    const c = new pg.Client({
      host: "127.0.0.1",
      port,
      user: "dbadmin",
      password,
      database: "defaultdb",
      ssl: { ca: await m.caCertificatePem(), servername: hostname },
    });
    await c.connect();
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
