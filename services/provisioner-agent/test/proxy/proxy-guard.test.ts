import { readFile } from "node:fs/promises";
import { Socket } from "node:net";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { replicationPassword } from "../../src/instances/replication.ts";
import { connect, startHost, startInstance, type TestHost, type TestInstance } from "../support/fixture.ts";
import { createNetns, type Netns, type NetnsChild, netnsUnusable, removeLeftovers, spawnChild } from "../support/netns.ts";

// The private-port guard without nftables (CONNECTION_METER=proxy): the userspace proxy connects to the servers
// from an address of its own and pg_hba admits customers from it alone (proxy/connection-proxy.ts,
// proxySourceAddress). The server's private address is this side of a veth, so another host (a network namespace,
// support/netns.ts) can route to it: what refuses a direct connection is the guard, not the network. Replication from
// AGENT_PRIVATE_NETWORK still gets in. The nftables guard is proven in nft-meter.test.ts.

const unusable = netnsUnusable();
const SECRET = "proxy-guard-secret";

/** A dbadmin login over TLS straight to `host:port` from this process: its `SELECT 1` or the server's refusal. */
async function directLogin(host: string, port: number, password: string): Promise<string> {
  const c = new pg.Client({
    host,
    port,
    user: "dbadmin",
    password,
    database: "defaultdb",
    ssl: { rejectUnauthorized: false },
    connectionTimeoutMillis: 5000,
  });
  c.on("error", () => {});
  try {
    await c.connect();
    return `logged in: ${JSON.stringify((await c.query("SELECT 1 AS one")).rows)}`;
  } catch (e) {
    return (e as Error).message;
  } finally {
    await c.end().catch(() => {});
  }
}

describe.skipIf(unusable)(
  `the userspace proxy's private-port guard${unusable ? ` (skipped: ${unusable})` : ""}`,
  { timeout: 120_000 },
  () => {
    let net: Netns;
    let host: TestHost;
    let db: TestInstance;
    let privatePort: number;
    let other: NetnsChild | undefined;

    beforeAll(async () => {
      removeLeftovers();
      net = createNetns("g", 0);
      host = await startHost("pguard", {
        connectionMeter: "proxy",
        replicationSecret: SECRET,
        privateAddress: net.rootAddress,
        privateNetwork: net.network,
      });
      db = await startInstance(host, "db-pguard");
      privatePort = (await host.runtime.observe(db.id)).replicationPort!;
      other = spawnChild(net.name);
    }, 120_000);

    afterAll(async () => {
      await other?.close();
      await host?.close();
      net?.remove();
    }, 60_000);

    it("through the published port a customer gets in, and the server sees the proxy's own address", async () => {
      const source = host.m.proxy.sourceAddress!;
      expect(source).toMatch(/^127\.(\d+)\.(\d+)\.(\d+)$/);
      expect(source.startsWith("127.0.")).toBe(false);
      const c = await connect(db.port, db.password);
      try {
        expect((await c.query("SELECT host(inet_client_addr()) AS a")).rows).toEqual([{ a: source }]);
      } finally {
        await c.end();
      }
      // pg_hba's one customer line names that address.
      const hba = await readFile(path.join(host.dataDir, "instances", db.id, "pg_hba.conf"), "utf8");
      expect(hba.split("\n").filter((l) => /^hostssl\s+all\s+all\s/.test(l))).toEqual([
        expect.stringMatching(new RegExp(`^hostssl\\s+all\\s+all\\s+${source.replaceAll(".", "\\.")}/32\\s+scram-sha-256$`)),
      ]);
    });

    it("a direct connection to the private port from this host is refused, the right password notwithstanding", async () => {
      expect(await directLogin(net.rootAddress, privatePort, db.password)).toMatch(
        new RegExp(`pg_hba\\.conf rejects connection for host "${net.rootAddress.replaceAll(".", "\\.")}", user "dbadmin"`),
      );
    });

    it("the declared weakness: a local process that binds the proxy's address reaches the server's SCRAM prompt", async () => {
      // No privilege is needed to bind a loopback address (nor, with IP_FREEBIND, any address), and pg_hba sees nothing
      // but the address: without nftables no uid can be told apart (README, "Connection proxy"; /healthz says
      // private_ports_guard: source-address). A password is all that stands in the way, as on the published port,
      // unmetered and past the trusted sources.
      const source = host.m.proxy.sourceAddress!;
      const bound = () => {
        const s = new Socket();
        const connect = s.connect.bind(s) as (o: object) => Socket;
        (s as unknown as { connect: (port: number, h: string) => Socket }).connect = (port, h) =>
          connect({ port, host: h, localAddress: source });
        return s;
      };
      const c = new pg.Client({
        host: net.rootAddress,
        port: privatePort,
        user: "dbadmin",
        password: db.password,
        database: "defaultdb",
        ssl: { rejectUnauthorized: false },
        connectionTimeoutMillis: 5000,
        stream: bound,
      });
      c.on("error", () => {});
      try {
        await c.connect();
        expect((await c.query("SELECT host(inet_client_addr()) AS a")).rows).toEqual([{ a: source }]);
      } finally {
        await c.end().catch(() => {});
      }
    });

    it("a direct connection from another host is refused; replication from the private network gets in", async () => {
      // Routed to the server (so what refuses the login is the guard, not the network) …
      expect(await other!.call<boolean>({ op: "tcp", host: net.rootAddress, port: privatePort })).toBe(true);
      const refused = await other!.call({ op: "customerLogin", host: net.rootAddress, port: privatePort, password: db.password }).then(
        (r) => `logged in: ${JSON.stringify(r)}`,
        (e: Error) => e.message,
      );
      expect(refused).toContain(`pg_hba.conf rejects connection for host "${net.nsAddress}", user "dbadmin"`);
      // … while a replica's agent there streams as before.
      const login = {
        op: "replicationLogin" as const,
        host: net.rootAddress,
        port: privatePort,
        password: replicationPassword(SECRET, db.id),
      };
      expect(await other!.call(login)).toHaveProperty("systemid");
    });
  },
);
