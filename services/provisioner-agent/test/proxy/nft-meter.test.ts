import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { rm } from "node:fs/promises";
import net from "node:net";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConnectionProxy } from "../../src/proxy/counters.ts";
import { createNftMeter, nftTableName } from "../../src/proxy/nft-meter.ts";
import { freePort, tempDataDir } from "../instances/helpers.ts";

// The kernel meter against real nftables and a real server: the system PostgreSQL (127.0.0.1:5432, trust) as the target.
const TARGET = {
  host: "127.0.0.1",
  port: Number(new URL(process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres").port || 5432),
};
const AGENT = "test-nft";

/** Why nft cannot be used here (not root, no nft, no CAP_NET_ADMIN), or undefined. */
function nftUnusable(): string | undefined {
  try {
    execFileSync("nft", ["-f", "-"], {
      input: "table ip dbaas_probe_test {}\ndelete table ip dbaas_probe_test\n",
      stdio: ["pipe", "ignore", "pipe"],
    });
    return undefined;
  } catch (e) {
    return String((e as { stderr?: Buffer }).stderr ?? (e as Error).message).trim() || (e as Error).message;
  }
}

const unusable = nftUnusable();
if (unusable) console.warn(`nft-meter tests skipped: nft is unusable here (${unusable})`);

const tables = () => execFileSync("nft", ["list", "tables", "ip"], { encoding: "utf8" });

/** One session through `port`: a 1 MB result comes back. Resolves with what the client's socket wrote and read. */
async function session(port: number): Promise<{ written: bigint; read: bigint }> {
  const raw = new net.Socket();
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: "postgres",
    database: "postgres",
    stream: () => raw,
    connectionTimeoutMillis: 5000,
  });
  await client.connect();
  const closed = new Promise((r) => raw.once("close", r));
  const row = (await client.query<{ n: number }>("SELECT length(repeat('x', 1000000)) AS n, repeat('x', 1000000) AS big")).rows[0]!;
  expect(row.n).toBe(1_000_000);
  await client.end();
  await closed;
  return { written: BigInt(raw.bytesWritten), read: BigInt(raw.bytesRead) };
}

/** A connection attempt to 127.0.0.1:<argv[1]> in a process of its own: prints "connected" or the error code. */
const CONNECT = `const s = require("node:net").connect({ host: "127.0.0.1", port: Number(process.argv[1]) });
s.once("connect", () => { console.log("connected"); s.destroy(); });
s.once("error", (e) => console.log(e.code ?? e.message));
setTimeout(() => { console.log("timeout"); process.exit(0); }, 5000).unref();`;

function refused(port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve("connected");
    });
    s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

describe.skipIf(unusable !== undefined)("nftables meter (real nft, the system PostgreSQL as the server)", { timeout: 60_000 }, () => {
  let dataDir: string;
  let meter: ConnectionProxy;
  let port: number;
  const made: { dir: string; table: string }[] = [];
  const newMeter = (dir: string) => {
    made.push({ dir, table: nftTableName(dir, AGENT) });
    return createNftMeter({ dataDir: dir, agentId: AGENT, listenAddress: "127.0.0.1" });
  };
  const countersOf = async (m: ConnectionProxy, id: string) => (await m.counters([id])).get(id);

  beforeAll(async () => {
    dataDir = await tempDataDir("nft");
    meter = newMeter(dataDir);
    port = await freePort();
  });

  afterAll(async () => {
    await meter?.close();
    for (const { dir, table } of made) {
      try {
        execFileSync("nft", ["delete", "table", "ip", table], { stdio: "ignore" });
      } catch {
        // reaped by a test already
      }
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("forwards the published port to the server and counts both ways, IP headers included", async () => {
    await meter.serve("db1", { port, target: TARGET });
    expect(meter.servedPort("db1")).toBe(port);
    const before = (await countersOf(meter, "db1"))!;
    expect(before).toMatchObject({ bytesIn: 0n, bytesOut: 0n });
    const s = await session(port);
    const after = (await countersOf(meter, "db1"))!;
    expect(after.epoch).toBe(before.epoch);
    // L3 bytes: every payload byte the socket saw plus 40+ bytes of headers per packet, a few percent at most here.
    expect(after.bytesOut).toBeGreaterThanOrEqual(s.read);
    expect(after.bytesOut).toBeGreaterThan(1_000_000n);
    expect(after.bytesOut).toBeLessThan(s.read + s.read / 10n + 65_536n);
    expect(after.bytesIn).toBeGreaterThan(s.written);
    expect(after.bytesIn).toBeLessThan(s.written + 65_536n);
    // The port is held for everyone else, as the proxy's listening socket held it.
    await expect(
      createNftMeter({ dataDir: `${dataDir}-other`, agentId: AGENT, listenAddress: "127.0.0.1" }).serve("x", { port, target: TARGET }),
    ).rejects.toThrow(/in use/);
    made.push({ dir: `${dataDir}-other`, table: nftTableName(`${dataDir}-other`, AGENT) });
  });

  it("a direct connection to the private port is dropped; through the published port it works; the agent's own get in", async () => {
    // A uid that is neither the agent's nor a server's: a local tenant process, or anyone on the host.
    const asStranger = (to: number) =>
      execFileSync("setpriv", ["--reuid=54321", "--regid=54321", "--clear-groups", process.execPath, "-e", CONNECT, String(to)], {
        encoding: "utf8",
        timeout: 20_000,
      }).trim();
    expect(asStranger(port)).toBe("connected");
    expect(asStranger(TARGET.port)).toBe("ECONNREFUSED");
    // The agent's own connections (its uid) still reach the server directly.
    expect(await refused(TARGET.port)).toBe("connected");
  });

  it("guards per port: a server's uid reaches its own private port and the one it streams from, no other tenant's", async () => {
    const asUid = (uid: number, to: number) =>
      execFileSync("setpriv", [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", process.execPath, "-e", CONNECT, String(to)], {
        encoding: "utf8",
        timeout: 20_000,
      }).trim();
    // Tenant B's server: a plain listener on a private port of its own (served, so guarded, like TARGET).
    const bPort = await freePort();
    const b = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => b.listen(bPort, "127.0.0.1", r));
    const other = newMeter(await tempDataDir("nft-peer"));
    try {
      await meter.serve("db2", { port: await freePort(), target: { host: "127.0.0.1", port: bPort } });
      // A (uid 54001) on TARGET; its replica (54002) streams from it; B (54003) on bPort; a replica (54004) that another
      // agent of this host runs streams from A too.
      await meter.guardLocal("db1", { uid: 54001, own: TARGET });
      await meter.guardLocal("db1r", { uid: 54002, own: { host: "127.0.0.1", port: await freePort() }, streamsFrom: TARGET });
      await meter.guardLocal("db2", { uid: 54003, own: { host: "127.0.0.1", port: bPort } });
      await other.guardLocal("x1r", { uid: 54004, own: { host: "127.0.0.1", port: await freePort() }, streamsFrom: TARGET });
      expect(asUid(54001, TARGET.port)).toBe("connected");
      expect(asUid(54002, TARGET.port)).toBe("connected");
      expect(asUid(54004, TARGET.port)).toBe("connected");
      expect(asUid(54003, bPort)).toBe("connected");
      // Every other tenant's uid, on both ports: A's server and A's replica to B's, B's to A's.
      expect(asUid(54001, bPort)).toBe("ECONNREFUSED");
      expect(asUid(54002, bPort)).toBe("ECONNREFUSED");
      expect(asUid(54004, bPort)).toBe("ECONNREFUSED");
      expect(asUid(54003, TARGET.port)).toBe("ECONNREFUSED");
      expect(asUid(54005, TARGET.port)).toBe("ECONNREFUSED");
      expect(await refused(bPort)).toBe("connected");
      // Flushed behind the agent's back: the repair (the trust keeper's, every 5 s) puts it back.
      execFileSync("nft", ["flush", "set", "ip", nftTableName(dataDir, AGENT), "local_peers"]);
      expect(asUid(54001, TARGET.port)).toBe("ECONNREFUSED");
      await meter.repairTrust();
      expect(asUid(54001, TARGET.port)).toBe("connected");
      // A replica stopped, another agent's gone: their uids no longer get through.
      await meter.guardLocal("db1r", undefined);
      await other.close();
      expect(asUid(54002, TARGET.port)).toBe("ECONNREFUSED");
      expect(asUid(54004, TARGET.port)).toBe("ECONNREFUSED");
      // Reaped with the instance.
      await meter.forget("db2");
      const peers = execFileSync("nft", ["-j", "list", "set", "ip", nftTableName(dataDir, AGENT), "local_peers"], { encoding: "utf8" });
      expect(peers).not.toContain("54003");
      expect(peers).toContain("54001");
    } finally {
      await other.close().catch(() => {});
      await new Promise((r) => b.close(r));
    }
  });

  it("unserve refuses new connections; the counters stay", async () => {
    const before = await countersOf(meter, "db1");
    await meter.unserve("db1");
    expect(meter.servedPort("db1")).toBeUndefined();
    expect(await refused(port)).toBe("ECONNREFUSED");
    expect(await countersOf(meter, "db1")).toEqual(before);
  });

  it("kill -9 of the agent: its connections keep flowing and counting; the next agent keeps the counts and the epoch", async () => {
    await meter.close();
    const before = (await countersOf(meter, "db1"))!;
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        fileURLToPath(new URL("./nft-meter-child.ts", import.meta.url)),
        dataDir,
        AGENT,
        "db1",
        String(port),
        TARGET.host,
        String(TARGET.port),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let client: pg.Client | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on("data", (d: Buffer) => d.toString().includes("serving") && resolve());
        child.once("exit", (code) => reject(new Error(`the agent child exited with ${code}`)));
      });
      client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", database: "postgres" });
      await client.connect();
      child.kill("SIGKILL");
      await once(child, "exit");
      // The established connection outlives the agent: the kernel forwards it, and counts it.
      const mid = (await countersOf(meter, "db1"))!;
      await client.query("SELECT repeat('x', 1000000)");
      const after = (await countersOf(meter, "db1"))!;
      expect(after.epoch).toBe(before.epoch);
      expect(after.bytesOut - mid.bytesOut).toBeGreaterThan(1_000_000n);
    } finally {
      child.kill("SIGKILL");
      await client?.end().catch(() => {});
    }

    const left = (await countersOf(meter, "db1"))!;
    meter = newMeter(dataDir);
    expect(await countersOf(meter, "db1")).toEqual(left);
    // The dead process's DNAT went at takeover: nothing is served until the agent serves it again.
    expect(await refused(port)).toBe("ECONNREFUSED");
    await meter.serve("db1", { port, target: TARGET });
    const s = await session(port);
    const after = (await countersOf(meter, "db1"))!;
    expect(after.epoch).toBe(before.epoch);
    expect(after.bytesOut - left.bytesOut).toBeGreaterThanOrEqual(s.read);
    // A graceful stop, then a start: same again.
    await meter.close();
    expect(await refused(port)).toBe("ECONNREFUSED");
    meter = newMeter(dataDir);
    expect(await countersOf(meter, "db1")).toEqual(after);
  });

  it("two agents with different data directories count apart, even for the same database id", async () => {
    const otherDir = await tempDataDir("nft-b");
    const other = newMeter(otherDir);
    const otherPort = await freePort();
    await meter.serve("db1", { port, target: TARGET });
    await other.serve("db1", { port: otherPort, target: TARGET });
    const mine = (await countersOf(meter, "db1"))!;
    const theirs = (await countersOf(other, "db1"))!;
    expect(theirs.epoch).not.toBe(mine.epoch);
    const s = await session(otherPort);
    expect(await countersOf(meter, "db1")).toEqual(mine);
    expect((await countersOf(other, "db1"))!.bytesOut - theirs.bytesOut).toBeGreaterThanOrEqual(s.read);
    await other.close();
  });

  it("a table whose data directory is gone is reaped when another agent starts", async () => {
    const goneDir = await tempDataDir("nft-gone");
    const gone = newMeter(goneDir);
    const gonePort = await freePort();
    await gone.serve("db9", { port: gonePort, target: TARGET });
    expect(tables()).toContain(nftTableName(goneDir, AGENT));
    // A destroyed test stack: its agent was killed and its directory removed; its DNAT would still hijack the port.
    await rm(goneDir, { recursive: true, force: true });
    const keptDir = await tempDataDir("nft-kept");
    const next = newMeter(keptDir);
    await next.counters([]);
    expect(tables()).not.toContain(nftTableName(goneDir, AGENT));
    expect(tables()).toContain(nftTableName(dataDir, AGENT));
    await next.close();
  });

  it("serving another port moves the counters with it; forget removes them", async () => {
    const before = (await countersOf(meter, "db1"))!;
    const newPort = await freePort();
    await meter.serve("db1", { port: newPort, target: TARGET });
    expect(await refused(port)).toBe("ECONNREFUSED");
    await session(newPort);
    const moved = (await countersOf(meter, "db1"))!;
    expect(moved.epoch).toBe(before.epoch);
    expect(moved.bytesOut - before.bytesOut).toBeGreaterThan(1_000_000n);
    await meter.forget("db1");
    expect(await countersOf(meter, "db1")).toBeUndefined();
    expect(await refused(newPort)).toBe("ECONNREFUSED");
    // A database served again after a purge starts a new epoch.
    await meter.serve("db1", { port: newPort, target: TARGET });
    expect((await countersOf(meter, "db1"))!.epoch).not.toBe(before.epoch);
  });

  it("refuses what cannot be written into a rule set", async () => {
    await expect(meter.serve('x"; flush ruleset; "', { port, target: TARGET })).rejects.toThrow(/invalid database id/);
    expect(() => createNftMeter({ dataDir: '/tmp/a"b', agentId: AGENT, listenAddress: "127.0.0.1" })).toThrow(/safely/);
  });
});
