/**
 * The agent of another host, for replicas/netns-replica.test.ts: run as
 * `ip netns exec <ns> node --import tsx netns-replica-child.ts`, it sees only
 * that namespace's network (its own loopback, a veth to the test's host).
 * Requests come on stdin and answers go to stdout, one JSON object a line;
 * an answer line starts with `@@ ` (anything else on stdout is not one).
 *
 * - `start`: opens a Host on the namespace's private address over the shared
 *   file store directory, with the region's replication secret, and has the
 *   reconciler converge the replica spec it is sent (seed, primary address,
 *   port, host name, CA, slot); answers once it runs (a replica's start is
 *   done once it streams).
 * - `query`: SQL as dbadmin through the replica's published port (this
 *   namespace's 127.0.0.1); `agentSql`: as the agent's superuser.
 * - `tcp`: whether a TCP connection to host:port is accepted from here.
 * - `replicationLogin`: a replication connection as dbaas_replication over
 *   TLS (IDENTIFY_SYSTEM), or the error it gets.
 * - `customerLogin`: a login as dbadmin over TLS straight to host:port (a
 *   server's private address: what the private-port guard refuses), its
 *   `SELECT 1` or the error it gets.
 * - `close`: stops everything and exits.
 */
import net from "node:net";
import readline from "node:readline";
import { fromJsonString } from "@bufbuild/protobuf";
import { InstanceSpecSchema } from "@dbaas/proto/agent";
import pg from "pg";
import { createFileStore } from "../../src/backups/file-store.ts";
import type { Reconciler } from "../../src/reconciler.ts";
import { query, reconcilerFor, running, startHost, type TestHost } from "./fixture.ts";

/** What the test sends; `id` pairs an answer with its request. */
export type ChildRequest = { id: number } & (
  | {
      op: "start";
      tag: string;
      storeDir: string;
      secret: string;
      privateAddress: string;
      privateNetwork: string;
      /** The replica's InstanceSpec as protobuf JSON, less its port (this host picks it). */
      spec: string;
    }
  | { op: "query"; password: string; sql: string }
  | { op: "agentSql"; sql: string }
  | { op: "tcp"; host: string; port: number }
  | { op: "replicationLogin"; host: string; port: number; password: string }
  | { op: "customerLogin"; host: string; port: number; password: string }
  | { op: "close" }
);

/** An answer: `result` on success, else the error's message and SQLSTATE (if any). */
export type ChildAnswer = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string; code?: string };

let host: TestHost | undefined;
let reconciler: Reconciler | undefined;
let replicaId = "";
let port = 0;

const answer = (a: ChildAnswer) => process.stdout.write(`@@ ${JSON.stringify(a)}\n`);

/** A TCP connection attempt with a 2 s limit: true if accepted, false if refused, unreachable or timed out. */
function tcpAccepts(h: string, p: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: h, port: p, timeout: 2000 });
    const done = (v: boolean) => {
      s.destroy();
      resolve(v);
    };
    s.once("connect", () => done(true));
    s.once("error", () => done(false));
    s.once("timeout", () => done(false));
  });
}

async function replicationLogin(h: string, p: number, password: string): Promise<unknown> {
  const c = new pg.Client({
    host: h,
    port: p,
    user: "dbaas_replication",
    password,
    database: "replication",
    replication: "true",
    ssl: { rejectUnauthorized: false },
    connectionTimeoutMillis: 5000,
  } as pg.ClientConfig);
  c.on("error", () => {});
  try {
    await c.connect();
    return (await c.query("IDENTIFY_SYSTEM")).rows[0];
  } finally {
    await c.end().catch(() => {});
  }
}

async function customerLogin(h: string, p: number, password: string): Promise<unknown> {
  const c = new pg.Client({
    host: h,
    port: p,
    user: "dbadmin",
    password,
    database: "defaultdb",
    ssl: { rejectUnauthorized: false },
    connectionTimeoutMillis: 5000,
  });
  c.on("error", () => {});
  try {
    await c.connect();
    return (await c.query("SELECT 1 AS one")).rows[0];
  } finally {
    await c.end().catch(() => {});
  }
}

async function handle(r: ChildRequest): Promise<unknown> {
  switch (r.op) {
    case "start": {
      const spec = fromJsonString(InstanceSpecSchema, r.spec);
      port = (await new Promise<number>((resolve, reject) => {
        const srv = net.createServer().once("error", reject);
        srv.listen(0, "127.0.0.1", () => {
          const p = (srv.address() as net.AddressInfo).port;
          srv.close(() => resolve(p));
        });
      })) as number;
      spec.port = port;
      replicaId = spec.databaseId;
      host = await startHost(r.tag, {
        store: createFileStore(r.storeDir),
        replicationSecret: r.secret,
        privateAddress: r.privateAddress,
        privateNetwork: r.privateNetwork,
      });
      reconciler = reconcilerFor(host);
      reconciler.setDesired([spec]);
      await running(reconciler, replicaId, spec.generation);
      return { port, dataDir: host.dataDir };
    }
    case "query":
      return query(port, r.password, r.sql);
    case "agentSql":
      if (!host) throw new Error("not started");
      return host.asAgent(replicaId, r.sql);
    case "tcp":
      return tcpAccepts(r.host, r.port);
    case "replicationLogin":
      return replicationLogin(r.host, r.port, r.password);
    case "customerLogin":
      return customerLogin(r.host, r.port, r.password);
    case "close":
      await reconciler?.drain();
      await host?.close();
      return null;
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const r = JSON.parse(line) as ChildRequest;
  handle(r).then(
    (result) => {
      answer({ id: r.id, ok: true, result: result ?? null });
      if (r.op === "close") process.exit(0);
    },
    (e: Error & { code?: string }) => answer({ id: r.id, ok: false, error: e.message, ...(e.code ? { code: e.code } : {}) }),
  );
});
// The test's end of stdin closing (it died): stop what runs here rather than leave servers behind.
lines.on("close", () => {
  void (async () => {
    await reconciler?.drain().catch(() => {});
    await host?.close();
    process.exit(0);
  })();
});
