import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chown, mkdir, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { findServerBinaries } from "../../services/provisioner-agent/src/instances/binaries.ts";
import { resolveRunAs, runCommand } from "../../services/provisioner-agent/src/instances/run-as.ts";

// The local stack's metadata PostgreSQL (deploy/local/metadata-main.ts, as
// `npm start` runs it): an OS user of its own, SCRAM only, the password in a
// 0600 file; a cluster an earlier version made (trust, as nobody) is converted.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

async function tryConnect(port: number, password?: string): Promise<string> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: "postgres",
    database: "dbaas",
    connectionTimeoutMillis: 10_000,
    ...(password !== undefined ? { password } : {}),
  });
  client.on("error", () => {});
  try {
    await client.connect();
    return String((await client.query("SELECT current_user AS u")).rows[0].u);
  } catch (err) {
    return `refused: ${(err as Error).message}`;
  } finally {
    await client.end().catch(() => {});
  }
}

describe.runIf(process.getuid?.() === 0)("the local stack's metadata PostgreSQL", { timeout: 240_000 }, () => {
  let keeper: ChildProcess | undefined;
  let dataDir: string | undefined;

  afterEach(async () => {
    if (keeper && keeper.exitCode === null) {
      const exited = new Promise((r) => keeper!.once("exit", r));
      keeper.kill("SIGTERM");
      await exited;
    }
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  /** Runs the keeper as the runner does; resolves once it says the server is ready. */
  async function startKeeper(dir: string, port: number): Promise<string[]> {
    const lines: string[] = [];
    let stderr = "";
    keeper = spawn(process.execPath, ["--import", "tsx", "deploy/local/metadata-main.ts"], {
      cwd: root,
      env: { ...process.env, DBAAS_DATA_DIR: dir, METADATA_PG_PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    keeper.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
    await new Promise<void>((ready, fail) => {
      const timer = setTimeout(() => fail(new Error(`metadata PostgreSQL not ready in 180 s: ${stderr}`)), 180_000);
      keeper!.once("exit", () => fail(new Error(`the keeper exited: ${stderr}`)));
      createInterface({ input: keeper!.stdout! }).on("line", (line) => {
        lines.push(line);
        if (line.includes("metadata PostgreSQL ready")) {
          clearTimeout(timer);
          ready();
        }
      });
    });
    return lines;
  }

  async function assertLockedDown(dir: string, port: number): Promise<void> {
    const passwordFile = path.join(dir, "metadata-password");
    expect((await stat(passwordFile)).mode & 0o777).toBe(0o600);
    const password = (await readFile(passwordFile, "utf8")).trim();
    expect(password.length).toBeGreaterThanOrEqual(32);
    expect(await tryConnect(port)).toMatch(/^refused: .*(password|SASL)/);
    expect(await tryConnect(port, "wrong")).toMatch(/^refused: password authentication failed/);
    expect(await tryConnect(port, password)).toBe("postgres");
    const hba = await readFile(path.join(dir, "metadata", "pg_hba.conf"), "utf8");
    expect(
      hba
        .split("\n")
        .filter((l) => /^\s*(local|host)/.test(l))
        .every((l) => /scram-sha-256\s*$/.test(l)),
    ).toBe(true);
    expect(hba).not.toMatch(/^\s*(local|host).*\btrust\b/m);
    // Its own user: not nobody, not root, outside the tenants' uid range.
    const owner = (await stat(path.join(dir, "metadata"))).uid;
    const pid = Number((await readFile(path.join(dir, "metadata", "postmaster.pid"), "utf8")).split("\n")[0]);
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
    expect(uid).toBe(owner);
    expect(uid).toBe(resolveRunAs("dbaas-metadata").uid);
    expect(uid).not.toBe(0);
    expect(uid).not.toBe(resolveRunAs("nobody").uid);
    expect(uid < 200_000 || uid > 299_999).toBe(true);
    // A tenant's uid (a server's, from AGENT_TENANT_UID_RANGE) reads none of it: not the data directory, the
    // socket and log directory, nor the password file. The directory above is traversable (0755), so the refusals
    // are the metadata's own modes.
    const tenant = 200_017;
    const runDir = path.join(dir, "metadata-run");
    for (const d of [path.join(dir, "metadata"), runDir]) await expect(asUid(tenant, "/bin/ls", d)).rejects.toThrow(/Permission denied/);
    for (const f of [path.join(dir, "metadata", "PG_VERSION"), path.join(dir, "metadata", "global", "pg_control"), passwordFile])
      await expect(asUid(tenant, "/bin/cat", f)).rejects.toThrow(/Permission denied/);
    // Root can, so the paths are right.
    expect((await readFile(path.join(dir, "metadata", "PG_VERSION"), "utf8")).trim()).toBe("17");
    expect((await stat(runDir)).isDirectory()).toBe(true);
  }

  it("a new cluster: its own OS user, a generated password, no trust; a connection without the password is refused", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "dbaas-metadata-"));
    await chownTraversable(dataDir);
    const port = await freePort();
    await startKeeper(dataDir, port);
    await assertLockedDown(dataDir, port);
    // Crash recovery syncs the filesystem once instead of fsyncing every file (seconds under I/O load).
    const password = (await readFile(path.join(dataDir, "metadata-password"), "utf8")).trim();
    const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", database: "dbaas", password });
    await client.connect();
    try {
      expect((await client.query("SHOW recovery_init_sync_method")).rows[0].recovery_init_sync_method).toBe("syncfs");
    } finally {
      await client.end();
    }
  });

  it("a cluster an earlier version made (trust, as nobody) is handed over and given the password", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "dbaas-metadata-old-"));
    await chownTraversable(dataDir);
    // What the earlier version did.
    const nobody = resolveRunAs("nobody");
    const tmp = path.join(dataDir, "metadata");
    await mkdir(tmp, { mode: 0o700 });
    await chown(tmp, nobody.uid, nobody.gid);
    await runCommand(
      findServerBinaries().get("17")!.initdb,
      ["-D", tmp, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"],
      {
        runAs: nobody,
      },
    );
    const port = await freePort();
    const lines = await startKeeper(dataDir, port);
    expect(lines.join("\n")).toContain("password set");
    await assertLockedDown(dataDir, port);
  });
});

/** Runs `file args` as uid/gid `uid` (no supplementary groups, setpriv); rejects with its stderr when it fails. */
async function asUid(uid: number, file: string, ...args: string[]): Promise<string> {
  const r = await promisify(execFile)("setpriv", [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", file, ...args], {
    cwd: "/",
    timeout: 30_000,
  });
  return r.stdout;
}

/** The runner makes its data directory traversable (0755) for the server's user; so does this test. */
async function chownTraversable(dir: string): Promise<void> {
  await (await import("node:fs/promises")).chmod(dir, 0o755);
}
