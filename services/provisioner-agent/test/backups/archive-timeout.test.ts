import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ConfigError } from "@dbaas/kit";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { BackupState } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { readConfig } from "../../src/config.ts";
import { createHost, type Host } from "../../src/instances/host.ts";
import { renderConfig } from "../../src/instances/server-config.ts";
import { type Fixture, managerFor, shutdown, startFixture, view, waitFor } from "./support.ts";

// BACKUP_ARCHIVE_TIMEOUT_S: how far the latest restorable instant trails a
// busy database. 30 s unless set; the backup end-to-end stacks lower it.

const REQUIRED = {
  DATABASES_URL: "http://127.0.0.1:1",
  INTERNAL_AUTH_SECRET: "s",
  AGENT_REPLICATION_SECRET: "r",
  BACKUP_ENCRYPTION_KEY: "ZGJhYXMtYmFja3VwLXRlc3QtbWFzdGVyLWtleS0zMmI=",
};
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

// The restore window of a database that never goes idle: no quiet sample to extend from, so the latest
// instant moves only as archive_timeout switches segments out and they are stored (the RPO's busy half;
// npm run bench:backups measures how far it trails at the 30 s default).
describe("a database under steady writes", { timeout: 120_000 }, () => {
  let fx: Fixture;
  let manager: BackupManager;
  let writing = true;
  let writer: Promise<number> | undefined;

  beforeAll(async () => {
    fx = await startFixture("busy", "17", { archiveTimeoutS: 2 });
    ({ manager } = managerFor(fx));
    await manager.start();
    manager.setDesired([{ ...fx.spec, backupIds: ["bkp-busy"] }]);
  }, 60_000);

  afterAll(async () => {
    writing = false;
    await writer;
    await shutdown(manager, fx);
  }, 60_000);

  it("has its latest restorable instant move past each moment while the writes go on", async () => {
    await waitFor(() => view(manager, fx.id)?.backups.some((b) => b.state === BackupState.COMPLETED), 60_000, "the base backup");
    await fx.sql("CREATE TABLE ticks (at timestamptz DEFAULT clock_timestamp())");
    writer = (async () => {
      let n = 0;
      for (; writing; n++) {
        await fx.sql("INSERT INTO ticks DEFAULT VALUES");
        await new Promise((r) => setTimeout(r, 50));
      }
      return n;
    })();
    for (let round = 0; round < 2; round++) {
      const mark = Date.now();
      const committedBefore = Number((await fx.sql("SELECT count(*) AS n FROM ticks"))[0]!.n);
      await waitFor(
        () => {
          const t = view(manager, fx.id)?.latestRestoreTime;
          return t !== undefined && timestampDate(t).getTime() >= mark;
        },
        60_000,
        `latest restorable instant past ${new Date(mark).toISOString()}`,
      );
      // The writes went on meanwhile: the window moved while the database was busy, not after it went quiet.
      expect(Number((await fx.sql("SELECT count(*) AS n FROM ticks"))[0]!.n)).toBeGreaterThan(committedBefore);
    }
    writing = false;
    expect(await writer).toBeGreaterThan(0);
  });
});
