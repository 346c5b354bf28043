import { execFileSync } from "node:child_process";
import { chmod, link, mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createMetricsRegistry } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { walKey } from "../../src/backups/layout.ts";
import { agentMetrics } from "../../src/metrics.ts";
import { reconcilerFor } from "../support/fixture.ts";
import { type Fixture, managerFor, shutdown, startFixture, view, waitFor, writeAndSwitch } from "./support.ts";

// The spool is writable by the database's server, so by whoever runs code in
// it: the agent (root) must not read through what they plant there. A
// symlink to a root-only file used to be uploaded into the store as WAL.

const SECRET = "root-only secret that must never reach the store";

describe.runIf(process.getuid?.() === 0)("the WAL uploader and what a tenant can write into its spool", { timeout: 120_000 }, () => {
  let fx: Fixture;
  let manager: BackupManager;
  let secretDir: string;

  beforeAll(async () => {
    fx = await startFixture("trust", "17");
    ({ manager } = managerFor(fx));
    await manager.start();
    manager.setDesired([{ ...fx.spec, backupIds: [] }]);
    // Root-only: a directory no one else may enter, a file only root reads.
    secretDir = path.join(tmpdir(), `dbaas-secret-${process.pid}`);
    await mkdir(secretDir, { mode: 0o700 });
    await writeFile(path.join(secretDir, "secret"), SECRET, { mode: 0o600 });
  }, 60_000);

  afterAll(async () => {
    await shutdown(manager, fx);
    await rm(secretDir, { recursive: true, force: true });
  }, 60_000);

  it("uploads the server's own WAL, and neither follows a symlink nor takes a file of another owner or a FIFO; each is counted once", async () => {
    // Names of segments far ahead, as a planted file would take.
    const viaSymlink = "0000000100000000000000F0";
    const viaHardlink = "0000000100000000000000F1";
    const fifo = "0000000100000000000000F2";
    await symlink(path.join(secretDir, "secret"), path.join(fx.spoolDir, viaSymlink));
    // A hard link keeps the file's owner (root); the server's uid cannot make one to a root file, root could.
    await link(path.join(secretDir, "secret"), path.join(fx.spoolDir, viaHardlink));
    execFileSync("mkfifo", [path.join(fx.spoolDir, fifo)]);
    await chmod(path.join(fx.spoolDir, fifo), 0o666);

    // The server's real WAL still goes up, past what was planted.
    const seg = await writeAndSwitch(fx);
    await waitFor(() => fx.store.exists(walKey(fx.id, seg)), 30_000, `${seg} in the store`);
    for (const name of [viaSymlink, viaHardlink, fifo]) expect(await fx.store.exists(walKey(fx.id, name)), name).toBe(false);

    const refused = manager.walFilesRefused();
    expect(refused).toEqual({ symlink: 1, foreign_owner: 1, not_regular: 1 });
    // Said in the database's status (archive_error), and counted once however many passes see them.
    await waitFor(() => view(manager, fx.id)?.archiveError.includes("not the server's regular files"), 10_000, "archive_error");
    await writeAndSwitch(fx);
    await new Promise((r) => setTimeout(r, 1000));
    expect(manager.walFilesRefused()).toEqual(refused);

    const registry = createMetricsRegistry();
    agentMetrics(registry, { reconciler: reconcilerFor({ dataDir: fx.dataDir, runtime: fx.runtime }), backups: manager });
    const text = await registry.metrics();
    expect(text).toContain('wal_files_refused_total{reason="symlink"} 1');
    expect(text).toContain('wal_files_refused_total{reason="foreign_owner"} 1');
    expect(text).toContain('wal_files_refused_total{reason="not_regular"} 1');

    // Gone from the spool: the database's status clears.
    for (const name of [viaSymlink, viaHardlink, fifo]) await rm(path.join(fx.spoolDir, name));
    await waitFor(() => view(manager, fx.id)?.archiveError === "", 10_000, "archive_error cleared");
  });
});
