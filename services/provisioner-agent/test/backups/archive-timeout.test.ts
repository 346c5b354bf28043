import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ConfigError } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../src/config.ts";
import { createHost, type Host } from "../../src/instances/host.ts";
import { renderConfig } from "../../src/instances/server-config.ts";

// BACKUP_ARCHIVE_TIMEOUT_S: how far the latest restorable instant trails a
// busy database. 30 s unless set; the backup end-to-end stacks lower it.

const REQUIRED = { DATABASES_URL: "http://127.0.0.1:1", INTERNAL_AUTH_SECRET: "s", AGENT_REPLICATION_SECRET: "r" };
const SETTINGS = { port: 15433, tier: "micro", hostname: "h", scramVerifier: "" };

describe("the servers' archive_timeout", () => {
  let dataDir: string;
  const hosts: Host[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "archive-timeout-"));
  });

  afterAll(async () => {
    for (const h of hosts) await h.proxy.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const hostWith = (archiveTimeoutS?: number) => {
    const h = createHost({
      dataDir: path.join(dataDir, String(archiveTimeoutS)),
      agentId: "agent-archive",
      connectionMeter: "proxy",
      ...(archiveTimeoutS ? { archiveTimeoutS } : {}),
    });
    hosts.push(h);
    return h;
  };

  it("is 30 s by default and BACKUP_ARCHIVE_TIMEOUT_S otherwise, which must be positive", () => {
    expect(readConfig(REQUIRED).backup.archiveTimeoutS).toBe(30);
    expect(readConfig({ ...REQUIRED, BACKUP_ARCHIVE_TIMEOUT_S: "5" }).backup.archiveTimeoutS).toBe(5);
    expect(() => readConfig({ ...REQUIRED, BACKUP_ARCHIVE_TIMEOUT_S: "0" })).toThrow(ConfigError);
  });

  it("is what the server's settings file says", () => {
    expect(renderConfig(hostWith(), "db-a", SETTINGS, 41235)).toMatch(/^archive_timeout = '30'$/m);
    expect(renderConfig(hostWith(5), "db-a", SETTINGS, 41235)).toMatch(/^archive_timeout = '5'$/m);
  });
});
