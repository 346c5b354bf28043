import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { nftTableName } from "../../src/proxy/nft-meter.ts";
import { freePort } from "../instances/helpers.ts";

// The shipped deployment's meter, proved here: the container image runs the agent as uid 1000 with an nft that
// carries the file capability cap_net_admin (deploy/docker/Dockerfile). The same is built on this machine — a
// copy of nft with `setcap cap_net_admin+ep` — and an agent's meter runs as `nobody` through it (NFT_PATH).
// Then the ways it must not work: no_new_privs (Kubernetes' allowPrivilegeEscalation: false) and no NET_ADMIN
// in the bounding set (no cap_add / capabilities.add), each falling back to the proxy.

const ROUTE_LOCALNET = "/proc/sys/net/ipv4/conf/all/route_localnet";
const AGENT = "test-nft-cap";
const CHILD = fileURLToPath(new URL("./nft-capability-child.ts", import.meta.url));
const PKG = fileURLToPath(new URL("../..", import.meta.url));

function run(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] });
}

function which(cmd: string): string | undefined {
  try {
    return run("sh", ["-c", `command -v ${cmd}`]).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Why this cannot be shown here, or undefined. */
function unprovable(): string | undefined {
  if (process.getuid?.() !== 0) return "not root (setcap and a switch to an unprivileged user need root)";
  for (const cmd of ["nft", "setcap", "setpriv"])
    if (!which(cmd)) return `no ${cmd} binary (apt-get install nftables libcap2-bin util-linux)`;
  try {
    run("id", ["-u", "nobody"]);
    run("nft", ["-f", "-"], "table ip dbaas_cap_probe {}\ndelete table ip dbaas_cap_probe\n");
  } catch (e) {
    return `no user nobody, or nft unusable even as root: ${String((e as { stderr?: string }).stderr ?? (e as Error).message).trim()}`;
  }
  return undefined;
}

const reason = unprovable();
if (reason) console.warn(`nft-capability tests skipped: ${reason}`);

/** This machine's first non-loopback IPv4 address: what a pod IP is to the agent. */
const outsideAddress = Object.values(os.networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

interface Hello {
  uid: number;
  capEff: string;
  log: string[];
}

interface Agent {
  hello: Hello;
  /** The published port it serves db1 on. */
  port: number;
  /** Its nftables table's name (if the kernel meters). */
  table: string;
  counters(): Promise<{ epoch: string; bytesIn: bigint; bytesOut: bigint }>;
  close(): Promise<void>;
}

/** A server that sends 1 MB to whoever connects, then ends: the database behind the meter. */
async function blaster(host: string): Promise<{ port: number; close(): Promise<void> }> {
  const payload = Buffer.alloc(1_000_000, 120);
  const srv = net.createServer((s) => {
    s.on("data", () => {});
    s.on("error", () => {});
    s.end(payload);
  });
  await new Promise<void>((r) => srv.listen(0, host, r));
  return { port: (srv.address() as net.AddressInfo).port, close: () => new Promise((r) => srv.close(() => r())) };
}

/** One connection through the published port: 1,000 bytes out, everything back. */
function session(port: number): Promise<{ written: number; read: number }> {
  return new Promise((resolve, reject) => {
    let read = 0;
    const s = net.connect({ host: "127.0.0.1", port }, () => s.write(Buffer.alloc(1000, 121)));
    s.on("data", (d: Buffer) => {
      read += d.length;
    });
    s.once("end", () => s.end());
    s.once("close", () => resolve({ written: s.bytesWritten, read }));
    s.once("error", reject);
  });
}

describe.skipIf(reason !== undefined)(
  "the nftables meter of an unprivileged agent, through an nft with cap_net_admin",
  { timeout: 60_000 },
  () => {
    let dir: string;
    let capNft: string;
    let nobody: { uid: number; gid: number };
    const cleanups: (() => Promise<void> | void)[] = [];

    beforeAll(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), "dbaas-it-nftcap-"));
      chmodSync(dir, 0o755);
      capNft = path.join(dir, "nft");
      copyFileSync(which("nft")!, capNft);
      chmodSync(capNft, 0o755);
      // What the Dockerfile does to /usr/sbin/nft.
      run("setcap", ["cap_net_admin+ep", capNft]);
      expect(run("getcap", [capNft])).toMatch(/cap_net_admin[=+]ep/);
      nobody = { uid: Number(run("id", ["-u", "nobody"])), gid: Number(run("id", ["-g", "nobody"])) };
    });

    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    /**
     * An agent's meter as `nobody`: `wrap` runs it under setpriv (a no_new_privs flag, a smaller bounding set).
     * Rejects with the child's stderr when its start fails.
     */
    async function startAgent(o: {
      mode: "auto" | "nftables";
      nft: string;
      listen: string;
      privateAddress: string;
      targetPort: number;
      wrap?: { asRoot: boolean; args: (as: { uid: number; gid: number }) => string[] };
    }): Promise<Agent> {
      const dataDir = mkdtempSync(path.join(dir, "agent-"));
      chownSync(dataDir, nobody.uid, nobody.gid);
      cleanups.push(() => {
        try {
          run("nft", ["delete", "table", "ip", nftTableName(dataDir, AGENT)]);
        } catch {
          // no table: the meter was the proxy, or did not start
        }
      });
      const port = await freePort();
      const args = [
        "--import",
        "tsx",
        CHILD,
        o.mode,
        dataDir,
        AGENT,
        o.listen,
        o.privateAddress,
        "db1",
        String(port),
        String(o.targetPort),
      ];
      const [cmd, argv] = o.wrap ? ["setpriv", [...o.wrap.args(nobody), process.execPath, ...args]] : [process.execPath, args];
      const child = spawn(cmd, argv, {
        cwd: PKG,
        env: { ...process.env, NFT_PATH: o.nft, HOME: dataDir },
        stdio: ["pipe", "pipe", "pipe"],
        ...(o.wrap?.asRoot ? {} : nobody),
      });
      let stderr = "";
      child.stderr!.on("data", (d: Buffer) => {
        stderr += d.toString();
      });
      const exited = new Promise<void>((r) => child.once("exit", () => r()));
      cleanups.push(async () => {
        child.kill("SIGKILL");
        await exited;
      });
      const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      const next = async () => {
        const l = await lines.next();
        if (l.done) {
          await exited;
          throw new Error(`the agent child exited: ${stderr.trim()}`);
        }
        return JSON.parse(l.value as string);
      };
      const hello = (await next()) as Hello;
      return {
        hello,
        port,
        table: nftTableName(dataDir, AGENT),
        async counters() {
          child.stdin!.write("counters\n");
          const c = await next();
          return { epoch: c.epoch, bytesIn: BigInt(c.bytesIn), bytesOut: BigInt(c.bytesOut) };
        },
        async close() {
          child.stdin!.write("close\n");
          await exited;
        },
      };
    }

    async function target(host: string): Promise<number> {
      const b = await blaster(host);
      cleanups.push(() => b.close());
      return b.port;
    }

    it("auto picks nftables for a uid-65534 agent with no capability of its own; the kernel forwards and counts", async () => {
      const targetPort = await target("127.0.0.1");
      const agent = await startAgent({ mode: "auto", nft: capNft, listen: "127.0.0.1", privateAddress: "127.0.0.1", targetPort });
      expect(agent.hello.uid).toBe(nobody.uid);
      // The agent process itself holds nothing: only the nft program it runs gets CAP_NET_ADMIN.
      expect(BigInt(`0x${agent.hello.capEff}`)).toBe(0n);
      expect(agent.hello.log).toContain("connections are forwarded and counted by the kernel (nftables)");
      const before = await agent.counters();
      const s = await session(agent.port);
      expect(s.read).toBe(1_000_000);
      const after = await agent.counters();
      expect(after.epoch).toBe(before.epoch);
      // IP packet bytes, headers included: at least the payload, a few percent more at most.
      expect(after.bytesOut - before.bytesOut).toBeGreaterThanOrEqual(BigInt(s.read));
      expect(after.bytesOut - before.bytesOut).toBeLessThan(BigInt(s.read + s.read / 10 + 65_536));
      expect(after.bytesIn - before.bytesIn).toBeGreaterThan(BigInt(s.written));
      // The agent's table is in the kernel, as root sees it, with db1's counters.
      expect(run("nft", ["list", "counters", "table", "ip", agent.table])).toMatch(/counter in_db1 /);
      await agent.close();
    });

    it("an agent that cannot look into another agent's data directory leaves its table alone", async () => {
      // Another agent's, in a directory only root may enter: to `nobody` its data directory is not there to see.
      const hidden = mkdtempSync(path.join(dir, "root-only-"));
      const otherDir = path.join(hidden, "agent");
      mkdirSync(otherDir);
      const other = nftTableName(otherDir, "other");
      run("nft", ["-f", "-"], `table ip ${other} { comment "agent other dir ${otherDir}"; }\n`);
      cleanups.push(() => void run("nft", ["delete", "table", "ip", other]));
      const agent = await startAgent({
        mode: "auto",
        nft: capNft,
        listen: "127.0.0.1",
        privateAddress: "127.0.0.1",
        targetPort: await target("127.0.0.1"),
      });
      // The takeover (and its reaping) is done before the first serve resolves.
      expect(agent.hello.log).toContain("connections are forwarded and counted by the kernel (nftables)");
      expect(agent.hello.log.join("\n")).not.toContain(other);
      expect(run("nft", ["list", "tables", "ip"])).toContain(other);
      await agent.close();
    });

    it.skipIf(outsideAddress === undefined)(
      "every listen address and a non-loopback private address (a pod IP): nftables, route_localnet left alone",
      async () => {
        const localnet = readFileSync(ROUTE_LOCALNET, "utf8").trim();
        const targetPort = await target(outsideAddress!);
        const agent = await startAgent({ mode: "auto", nft: capNft, listen: "0.0.0.0", privateAddress: outsideAddress!, targetPort });
        expect(agent.hello.log).toContain("connections are forwarded and counted by the kernel (nftables)");
        const s = await session(agent.port);
        expect(s.read).toBe(1_000_000);
        expect((await agent.counters()).bytesOut).toBeGreaterThanOrEqual(1_000_000n);
        expect(readFileSync(ROUTE_LOCALNET, "utf8").trim()).toBe(localnet);
        await agent.close();
      },
    );

    it.skipIf(readFileSync(ROUTE_LOCALNET, "utf8").trim() === "1")(
      "every listen address and a loopback private address: route_localnet is needed, which the agent cannot set, so nftables is refused",
      async () => {
        const targetPort = await target("127.0.0.1");
        await expect(
          startAgent({ mode: "nftables", nft: capNft, listen: "0.0.0.0", privateAddress: "127.0.0.1", targetPort }),
        ).rejects.toThrow(/route_localnet=1, which the agent cannot set/);
      },
    );

    it.each([
      { name: "the distribution's nft (no file capability)", nft: () => which("nft")!, wrap: undefined },
      // Kubernetes' allowPrivilegeEscalation: false sets no_new_privs: file capabilities are not granted.
      { name: "no_new_privs", nft: () => capNft, wrap: { asRoot: false, args: () => ["--no-new-privs"] } },
      // No NET_ADMIN in the bounding set (no cap_add, no capabilities.add): the kernel refuses to run the capable nft.
      {
        name: "no NET_ADMIN in the bounding set",
        nft: () => capNft,
        wrap: {
          asRoot: true,
          args: (u: { uid: number; gid: number }) => [
            "--bounding-set=-net_admin",
            `--reuid=${u.uid}`,
            `--regid=${u.gid}`,
            "--clear-groups",
            "--inh-caps=-all",
          ],
        },
      },
    ])("$name: auto falls back to the proxy, which forwards and counts", async ({ nft, wrap }) => {
      const targetPort = await target("127.0.0.1");
      const agent = await startAgent({ mode: "auto", nft: nft(), listen: "127.0.0.1", privateAddress: "127.0.0.1", targetPort, wrap });
      expect(agent.hello.uid).toBe(nobody.uid);
      expect(agent.hello.log.join("\n")).toMatch(/nftables cannot be used \(.*(not permitted|EPERM).*\); the agent's own proxy forwards/is);
      const s = await session(agent.port);
      expect(s.read).toBe(1_000_000);
      expect((await agent.counters()).bytesOut).toBe(1_000_000n);
      await agent.close();
    });
  },
);
