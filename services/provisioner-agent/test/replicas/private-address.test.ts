import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ConfigError } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../src/config.ts";
import { createHost, type Host } from "../../src/instances/host.ts";
import { privateAddressing } from "../../src/instances/private-network.ts";
import { standbySettings } from "../../src/instances/replication.ts";
import { openHba, renderConfig } from "../../src/instances/server-config.ts";

// Agents of a region on different hosts: servers listen on the agent's
// private address (a pod IP), replicas stream from it, and a primary admits
// replication from the private network only.

const REQUIRED = {
  DATABASES_URL: "http://127.0.0.1:1",
  INTERNAL_AUTH_SECRET: "s",
  AGENT_REPLICATION_SECRET: "r",
  BACKUP_ENCRYPTION_KEY: "ZGJhYXMtYmFja3VwLXRlc3QtbWFzdGVyLWtleS0zMmI=",
};

describe("the agent's private address", () => {
  let dataDir: string;
  let host: Host;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "private-address-"));
    host = createHost({
      dataDir,
      agentId: "agent-private",
      connectionMeter: "proxy",
      privateAddress: "10.20.30.40",
      privateNetwork: "10.20.0.0/16",
    });
  });

  afterAll(async () => {
    await host.proxy.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("is where a server listens and where the replication line of pg_hba admits replicas from", () => {
    const conf = renderConfig(
      host,
      "db-private",
      { port: 15432, tier: "micro", hostname: "db-private.example.test", scramVerifier: "" },
      41234,
    );
    expect(conf).toMatch(/^listen_addresses = '10\.20\.30\.40'$/m);
    expect(conf).toMatch(/^port = '41234'$/m);
    const hba = openHba(host);
    expect(hba).toMatch(/^hostssl replication dbaas_replication 10\.20\.0\.0\/16 scram-sha-256$/m);
    expect(hba).not.toMatch(/127\.0\.0\.1/);
  });

  it("is what a replica of a primary on another host connects to, verifying the primary's name", () => {
    const lines = standbySettings(host, "rep-private", {
      primaryDatabaseId: "db-far",
      primaryAddress: "10.20.99.7",
      primaryPort: 40001,
      primaryHost: "db-far.example.test",
      primaryCaPem: "",
      slotName: "dbaas_rep_private",
    });
    const conninfo = lines.find((l) => l.startsWith("primary_conninfo"))!;
    expect(conninfo).toContain("host=''db-far.example.test'' hostaddr=''10.20.99.7'' port=40001");
    expect(conninfo).toContain("sslmode=verify-full");
    expect(lines).toContain("wal_retrieve_retry_interval = '1s'");
  });

  it("defaults to loopback, admitting replication from loopback only", async () => {
    expect(privateAddressing()).toEqual({ address: "127.0.0.1", network: "127.0.0.1/32" });
    expect(privateAddressing("::1")).toEqual({ address: "::1", network: "::1/128" });
    const cfg = readConfig(REQUIRED);
    expect([cfg.privateAddress, cfg.privateNetwork]).toEqual(["127.0.0.1", "127.0.0.1/32"]);
    const local = createHost({ dataDir: path.join(dataDir, "local"), agentId: "agent-local", connectionMeter: "proxy" });
    try {
      expect(renderConfig(local, "db-l", { port: 15433, tier: "micro", hostname: "h", scramVerifier: "" }, 41235)).toMatch(
        /^listen_addresses = '127\.0\.0\.1'$/m,
      );
      expect(openHba(local)).toMatch(/^hostssl replication dbaas_replication 127\.0\.0\.1\/32 scram-sha-256$/m);
    } finally {
      await local.proxy.close();
    }
  });

  it("needs the network named when it is not loopback, and refuses what is not an address or a CIDR", () => {
    expect(() => readConfig({ ...REQUIRED, AGENT_PRIVATE_ADDRESS: "10.20.30.40" })).toThrow(ConfigError);
    expect(() => readConfig({ ...REQUIRED, AGENT_PRIVATE_ADDRESS: "10.20.30.40" })).toThrow(/AGENT_PRIVATE_NETWORK must be set/);
    const cfg = readConfig({ ...REQUIRED, AGENT_PRIVATE_ADDRESS: "10.20.30.40", AGENT_PRIVATE_NETWORK: "10.20.0.0/16" });
    expect([cfg.privateAddress, cfg.privateNetwork]).toEqual(["10.20.30.40", "10.20.0.0/16"]);
    expect(() => privateAddressing("db.internal", "10.0.0.0/8")).toThrow(/must be an IP address/);
    expect(() => privateAddressing("10.1.1.1", "10.0.0.0")).toThrow(/must be a CIDR/);
    expect(() => privateAddressing("10.1.1.1", "10.0.0.0/33")).toThrow(/must be a CIDR/);
    expect(() => privateAddressing("10.1.1.1", "fd00::/8")).toThrow(/address family/);
  });
});
