import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { rm } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type tls from "node:tls";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInstanceManager, type InstanceManager } from "../../src/instances/instance-manager.ts";
import { createConnectionProxy } from "../../src/proxy/connection-proxy.ts";
import type { ConnectionProxy, ProxyCounters } from "../../src/proxy/counters.ts";
import { freePort, randomPassword, scramVerifier, tempDataDir, waitFor } from "../support/fixture.ts";

const HOST = "db-proxy.example.test";
const ID = "prox1";
const AGENT = "test-proxy";

/** A pg client (verify-full against `ca`) whose raw TCP socket we keep, to read its byte counts. */
async function open(port: number, password: string, ca: string) {
  const raw = new net.Socket();
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: "dbadmin",
    password,
    database: "defaultdb",
    ssl: { ca, servername: HOST },
    stream: () => raw,
    connectionTimeoutMillis: 5000,
  });
  client.on("error", () => {});
  await client.connect();
  const closed = once(raw, "close");
  return { client, raw, closed };
}

/** One whole session; resolves with what its socket wrote and read, once the proxy has closed it. */
async function session(port: number, password: string, ca: string, work: (c: pg.Client) => Promise<unknown>) {
  const { client, raw, closed } = await open(port, password, ca);
  await work(client);
  await client.end();
  await closed;
  return { written: BigInt(raw.bytesWritten), read: BigInt(raw.bytesRead) };
}

const moveData = async (c: pg.Client) => {
  await c.query("SELECT length($1::text) AS n", ["y".repeat(1_000_000)]);
  await c.query("SELECT repeat('x', 2000000) AS big");
};

/** A query streaming ~3 MB over ~3 s, so a transfer is under way when the proxy goes. */
const STREAM = "SELECT i, pg_sleep(0.02), repeat('x', 20000) FROM generate_series(1, 150) i";

describe("connection proxy (PostgreSQL 17)", { timeout: 120_000 }, () => {
  let dataDir: string;
  let proxy: ConnectionProxy;
  let m: InstanceManager;
  let port: number;
  let ca: string;
  const password = randomPassword();
  const proxyDir = () => path.join(dataDir, "proxy");
  const countersOf = async (id: string) => (await proxy.counters([id])).get(id);
  /** A new agent on the same data directory, as after a restart: its own proxy, serving what runs. */
  const takeOver = async () => {
    proxy = createConnectionProxy({ dir: proxyDir(), listenAddress: "127.0.0.1" });
    m = createInstanceManager({ dataDir, agentId: AGENT, proxy });
    await m.serveRunning();
  };

  beforeAll(async () => {
    dataDir = await tempDataDir("proxy");
    proxy = createConnectionProxy({ dir: path.join(dataDir, "proxy"), listenAddress: "127.0.0.1" });
    m = createInstanceManager({ dataDir, agentId: AGENT, proxy });
    port = await freePort();
    await m.provision(ID, { major: "17" });
    await m.start(ID, { port, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(password) });
    ca = await m.caCertificatePem();
  }, 120_000);

  afterAll(async () => {
    await m?.stopAll();
    await proxy?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    if (m) await rm(m.socketDir, { recursive: true, force: true });
  }, 60_000);

  it("serves the published port with TLS passed through: the client verifies the instance's own certificate", async () => {
    const { client } = await open(port, password, ca);
    const row = (
      await client.query<{ port: string; addr: string; ssl: boolean }>(
        "SELECT current_setting('port') AS port, inet_server_addr()::text AS addr, (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()) AS ssl",
      )
    ).rows[0]!;
    const viaProxy = (client.connection.stream as tls.TLSSocket).getPeerCertificate().fingerprint256;
    await client.end();
    expect(row.ssl).toBe(true);
    // The server listens on loopback, on a port of its own; clients only know the published one.
    const privatePort = Number(row.port);
    expect(privatePort).not.toBe(port);
    expect(row.addr).toBe("127.0.0.1/32");
    expect(await m.observe(ID)).toMatchObject({ state: "running", port });
    // The certificate seen through the proxy is the one the server presents directly.
    const direct = await open(privatePort, password, ca);
    expect((direct.client.connection.stream as tls.TLSSocket).getPeerCertificate().fingerprint256).toBe(viaProxy);
    await direct.client.end();
    await expect(open(port, password, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")).rejects.toThrow();
  });

  it("counts bytes each way exactly as the client's socket saw them, per connection and summed", async () => {
    const before = (await countersOf(ID))!;
    expect(before.bytesIn).toBeGreaterThan(0n);
    const [a, b] = await Promise.all([session(port, password, ca, moveData), session(port, password, ca, moveData)]);
    const after = (await countersOf(ID))!;
    expect(after.epoch).toBe(before.epoch);
    expect(after.bytesIn - before.bytesIn).toBe(a.written + b.written);
    expect(after.bytesOut - before.bytesOut).toBe(a.read + b.read);
    expect(a.written).toBeGreaterThan(1_000_000n);
    expect(a.read).toBeGreaterThan(2_000_000n);
  });

  it("a stopped database refuses connections; its counters stay; a start serves it again", async () => {
    const before = (await countersOf(ID))!;
    await m.stop(ID);
    await expect(open(port, password, ca)).rejects.toThrow(/ECONNREFUSED/);
    expect(await countersOf(ID)).toEqual(before);
    await m.start(ID, { port, tier: "micro", hostname: HOST, scramVerifier: scramVerifier(password) });
    const s = await session(port, password, ca, (c) => c.query("SELECT 1"));
    // Beside the session, the start's readiness probe came in through the published port as a client does
    // (a TLS handshake, a startup packet, a close_notify: about 1 KB each way).
    const after = (await countersOf(ID))!;
    expect(after.epoch).toBe(before.epoch);
    for (const probe of [after.bytesIn - before.bytesIn - s.written, after.bytesOut - before.bytesOut - s.read]) {
      expect(probe).toBeGreaterThan(0n);
      expect(probe).toBeLessThan(4096n);
    }
  });

  /** Starts STREAM and resolves once data flows, with the client's socket and the query's outcome. */
  async function streaming() {
    const { client, raw } = await open(port, password, ca);
    const done = client.query(STREAM).then(
      () => "finished",
      (e: Error) => e.message,
    );
    await waitFor(() => raw.bytesRead > 200_000, 10_000);
    return { raw, done };
  }

  /** What a transfer cut off by the proxy's end left: in exact (the query was sent whole), out at least what the client got. */
  function expectCarriedOver(before: ProxyCounters, after: ProxyCounters, written: bigint, read: bigint) {
    expect(after.epoch).toBe(before.epoch);
    expect(after.bytesIn).toBe(before.bytesIn + written);
    expect(after.bytesOut).toBeGreaterThanOrEqual(before.bytesOut + read);
    // Counted but never read: at most what sat in socket buffers when the proxy went.
    expect(after.bytesOut - before.bytesOut - read).toBeLessThan(8_000_000n);
  }

  it("a proxy restart mid-transfer: the instance stays up, the client reconnects, counters carry on in the same epoch", async () => {
    const pid = (await m.observe(ID)).pid;
    const before = (await countersOf(ID))!;
    const { raw, done } = await streaming();
    const written = BigInt(raw.bytesWritten);
    await proxy.close();
    expect(await done).not.toBe("finished");
    const read = BigInt(raw.bytesRead);
    const last = (await countersOf(ID))!;
    expectCarriedOver(before, last, written, read);
    await expect(open(port, password, ca)).rejects.toThrow(/ECONNREFUSED/);

    await takeOver();
    expect(await countersOf(ID)).toEqual(last);
    expect((await m.observe(ID)).pid).toBe(pid);
    const s = await session(port, password, ca, moveData);
    expect(await countersOf(ID)).toEqual({ epoch: last.epoch, bytesIn: last.bytesIn + s.written, bytesOut: last.bytesOut + s.read });
  });

  it("kill -9 of an agent process mid-transfer loses nothing it forwarded and counts nothing twice", async () => {
    const pid = (await m.observe(ID)).pid;
    await proxy.close();
    const before = (await countersOf(ID))!;
    const child: ChildProcess = spawn(
      process.execPath,
      ["--import", "tsx", fileURLToPath(new URL("./agent-child.ts", import.meta.url)), dataDir, AGENT],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    try {
      let out = "";
      child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
      await waitFor(() => out.includes("serving"), 60_000);
      const { raw, done } = await streaming();
      const written = BigInt(raw.bytesWritten);
      child.kill("SIGKILL");
      await once(child, "exit");
      expect(await done).not.toBe("finished");
      const read = BigInt(raw.bytesRead);

      await takeOver();
      expectCarriedOver(before, (await countersOf(ID))!, written, read);
      expect((await m.observe(ID)).pid).toBe(pid);
      const mid = (await countersOf(ID))!;
      const s = await session(port, password, ca, moveData);
      expect(await countersOf(ID)).toEqual({ epoch: before.epoch, bytesIn: mid.bytesIn + s.written, bytesOut: mid.bytesOut + s.read });
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("a purge forgets the database's counters", async () => {
    await m.purge(ID);
    expect(await countersOf(ID)).toBeUndefined();
    await expect(open(port, password, ca)).rejects.toThrow(/ECONNREFUSED/);
  });
});
