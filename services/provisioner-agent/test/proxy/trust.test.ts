import { execFileSync } from "node:child_process";
import { rm } from "node:fs/promises";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConnectionProxy } from "../../src/proxy/connection-proxy.ts";
import type { ConnectionProxy } from "../../src/proxy/counters.ts";
import { createNftMeter, nftTableName } from "../../src/proxy/nft-meter.ts";
import { admittedAt, admitter, ipv4Networks } from "../../src/proxy/trust.ts";
import { freePort, tempDataDir } from "../instances/helpers.ts";

// Trusted sources in both meters (docs/product.md, Trusted sources and connection pooling): a client from an
// address the database does not trust is reset before its server accepts anything, one it trusts gets through,
// an empty list admits all, a pooler's port (accounted to its database) follows the same list, and the
// nftables rules come back after being changed behind the meter's back. Clients bind other loopback addresses
// (127.0.0.x) as their source.

function nftUnusable(): string | undefined {
  try {
    execFileSync("nft", ["-f", "-"], {
      input: "table ip dbaas_probe_trust {}\ndelete table ip dbaas_probe_trust\n",
      stdio: ["pipe", "ignore", "pipe"],
    });
    return undefined;
  } catch (e) {
    return String((e as { stderr?: Buffer }).stderr ?? (e as Error).message).trim() || (e as Error).message;
  }
}
const unusable = nftUnusable();

/** An echo server standing for PostgreSQL: it counts the connections that reached it. */
async function echoServer(): Promise<{ port: number; accepted: () => number; close: () => Promise<void> }> {
  let accepted = 0;
  const srv = net.createServer((s) => {
    accepted++;
    s.pipe(s);
  });
  await new Promise<void>((r) => srv.listen({ host: "127.0.0.1", port: 0 }, r));
  return {
    port: (srv.address() as net.AddressInfo).port,
    accepted: () => accepted,
    close: () => new Promise((r) => srv.close(() => r())),
  };
}

/** "ok" when an echo came back through `port` from `source`, else the error's code. */
function tryFrom(source: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port, localAddress: source });
    const timer = setTimeout(() => {
      s.destroy();
      resolve("timeout");
    }, 5000);
    s.once("connect", () => s.write("ping"));
    s.once("data", (d) => {
      clearTimeout(timer);
      s.destroy();
      resolve(d.toString() === "ping" ? "ok" : "garbled");
    });
    s.once("error", (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(e.code ?? e.message);
    });
    s.once("close", () => {
      clearTimeout(timer);
      resolve("closed");
    });
  });
}

describe("trusted-source lists", () => {
  it("drop expired entries and say when the next one expires", () => {
    const now = new Date("2026-01-01T00:00:00Z");
    const soon = new Date("2026-01-01T00:00:10Z");
    const later = new Date("2026-01-01T00:01:00Z");
    expect(
      admittedAt(
        [
          { cidr: "10.0.0.0/8" },
          { cidr: "192.0.2.1/32", expiresAt: new Date("2025-12-31T23:59:59Z") },
          { cidr: "198.51.100.0/24", expiresAt: later },
          { cidr: "2001:db8::/32", expiresAt: soon },
          { cidr: "garbage" },
        ],
        now,
      ),
    ).toEqual({ cidrs: ["10.0.0.0/8", "198.51.100.0/24", "2001:db8::/32"], nextChange: soon });
    expect(admittedAt([{ cidr: "10.0.0.0/8", expiresAt: now }], now)).toEqual({ cidrs: [], nextChange: undefined });
  });

  it("match both families, IPv4-mapped clients as IPv4", () => {
    const ok = admitter(["10.0.0.0/8", "2001:db8::/32"]);
    expect(ok("10.2.3.4")).toBe(true);
    expect(ok("::ffff:10.2.3.4")).toBe(true);
    expect(ok("11.0.0.1")).toBe(false);
    expect(ok("2001:db8::5")).toBe(true);
    expect(ok("2001:db9::5")).toBe(false);
    expect(ok(undefined)).toBe(false);
    expect(admitter([])("203.0.113.9")).toBe(true);
  });

  it("leave nested IPv4 networks out of the kernel's interval set", () => {
    expect(ipv4Networks(["10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24", "192.0.2.0/24", "2001:db8::/32", "0.0.0.0/0"].slice(0, 5))).toEqual([
      "10.0.0.0/8",
      "192.0.2.0/24",
      "192.0.2.0/24",
    ]);
    expect(ipv4Networks(["0.0.0.0/0", "10.0.0.0/8"])).toEqual(["0.0.0.0/0"]);
  });
});

function meterCases(kind: "nftables" | "proxy") {
  let dataDir: string;
  let meter: ConnectionProxy;
  let server: Awaited<ReturnType<typeof echoServer>>;
  let port: number;
  let poolerPort: number;

  beforeAll(async () => {
    dataDir = await tempDataDir(`trust-${kind}`);
    server = await echoServer();
    meter =
      kind === "nftables"
        ? createNftMeter({ dataDir, agentId: "test-trust", listenAddress: "127.0.0.1" })
        : createConnectionProxy({ dir: dataDir, listenAddress: "127.0.0.1" });
    port = await freePort();
    poolerPort = await freePort();
    await meter.serve("db-trust", { port, target: { host: "127.0.0.1", port: server.port } });
  });

  afterAll(async () => {
    await meter?.close();
    if (kind === "nftables") {
      try {
        execFileSync("nft", ["delete", "table", "ip", nftTableName(dataDir, "test-trust")], { stdio: "ignore" });
      } catch {
        // gone already
      }
    }
    await server?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("admits everyone without a list; with one, only its sources reach the server", async () => {
    expect(await tryFrom("127.0.0.5", port)).toBe("ok");
    await meter.trust("db-trust", ["127.0.0.6/32", "10.0.0.0/8"]);
    const before = server.accepted();
    const refused = await tryFrom("127.0.0.5", port);
    expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(refused);
    expect(server.accepted()).toBe(before);
    expect(await tryFrom("127.0.0.6", port)).toBe("ok");
    await meter.trust("db-trust", ["127.0.0.5/32"]);
    expect(await tryFrom("127.0.0.5", port)).toBe("ok");
    expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.6", port));
    await meter.trust("db-trust", []);
    expect(await tryFrom("127.0.0.6", port)).toBe("ok");
  });

  it("an IPv6-only list admits no IPv4 client", async () => {
    await meter.trust("db-trust", ["2001:db8::/32"]);
    expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.5", port));
    await meter.trust("db-trust", []);
  });

  it("a port accounted to the database (its pooler's) follows its list, set before or after it is served", async () => {
    await meter.trust("db-trust", ["127.0.0.7/32"]);
    await meter.serve("db-trust-pooler", { port: poolerPort, target: { host: "127.0.0.1", port: server.port }, account: "db-trust" });
    expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.5", poolerPort));
    const before = (await meter.counters(["db-trust"])).get("db-trust")!;
    expect(await tryFrom("127.0.0.7", poolerPort)).toBe("ok");
    // Its bytes are the database's; it has no counters of its own. The database's own port still counts too.
    const after = (await meter.counters(["db-trust"])).get("db-trust")!;
    expect(after.epoch).toBe(before.epoch);
    expect(after.bytesIn).toBeGreaterThan(before.bytesIn);
    expect(after.bytesOut).toBeGreaterThan(before.bytesOut);
    expect((await meter.counters(["db-trust-pooler"])).size).toBe(0);
    expect(await tryFrom("127.0.0.7", port)).toBe("ok");
    expect((await meter.counters(["db-trust"])).get("db-trust")!.bytesIn).toBeGreaterThan(after.bytesIn);
    await meter.trust("db-trust", []);
    expect(await tryFrom("127.0.0.5", poolerPort)).toBe("ok");
    await meter.unserve("db-trust-pooler");
  });

  it("a meter started again (an agent restarted) keeps the lists until told its own: a port served again is never open", async () => {
    await meter.trust("db-trust", ["127.0.0.6/32"]);
    await meter.close();
    meter =
      kind === "nftables"
        ? createNftMeter({ dataDir, agentId: "test-trust", listenAddress: "127.0.0.1" })
        : createConnectionProxy({ dir: dataDir, listenAddress: "127.0.0.1" });
    await meter.serve("db-trust", { port, target: { host: "127.0.0.1", port: server.port } });
    expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.5", port));
    expect(await tryFrom("127.0.0.6", port)).toBe("ok");
    // An IPv6-only list is kept as one too.
    await meter.trust("db-trust", ["2001:db8::/32"]);
    await meter.close();
    meter =
      kind === "nftables"
        ? createNftMeter({ dataDir, agentId: "test-trust", listenAddress: "127.0.0.1" })
        : createConnectionProxy({ dir: dataDir, listenAddress: "127.0.0.1" });
    await meter.serve("db-trust", { port, target: { host: "127.0.0.1", port: server.port } });
    expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.6", port));
    // Told its own list (empty): open again.
    await meter.trust("db-trust", []);
    expect(await tryFrom("127.0.0.5", port)).toBe("ok");
  });

  if (kind === "nftables") {
    it("puts back rules changed behind its back", async () => {
      const table = nftTableName(dataDir, "test-trust");
      await meter.trust("db-trust", ["127.0.0.6/32"]);
      expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.5", port));
      // Someone empties the database's chain and the port map: everyone gets in.
      execFileSync("nft", ["flush", "chain", "ip", table, "trust_db-trust"]);
      execFileSync("nft", ["flush", "map", "ip", table, "trust_ports"]);
      expect(await tryFrom("127.0.0.5", port)).toBe("ok");
      await meter.repairTrust();
      expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.5", port));
      expect(await tryFrom("127.0.0.6", port)).toBe("ok");
      // Even the hook's rule.
      execFileSync("nft", ["flush", "chain", "ip", table, "trust_in"]);
      expect(await tryFrom("127.0.0.5", port)).toBe("ok");
      await meter.repairTrust();
      expect(["ECONNRESET", "ECONNREFUSED", "closed"]).toContain(await tryFrom("127.0.0.5", port));
      await meter.trust("db-trust", []);
      expect(execFileSync("nft", ["list", "table", "ip", table], { encoding: "utf8" })).not.toContain("trust_db-trust");
    });
  }
}

describe.skipIf(unusable !== undefined)("the nftables meter's trusted sources (real nft)", { timeout: 60_000 }, () =>
  meterCases("nftables"),
);
describe("the userspace proxy's trusted sources", { timeout: 60_000 }, () => meterCases("proxy"));
