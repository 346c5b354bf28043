import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import type { InstanceSettings } from "../runtime.ts";
import { ADMIN_ROLE, DEFAULT_DATABASE, withAgentClient } from "./agent-socket.ts";
import { errMsg, tail } from "./files.ts";
import type { Host } from "./host.ts";
import { observeInstance, readPidFile } from "./observe.ts";
import { probeTlsLogin } from "./probe.ts";
import { ensureReplicationRole, waitStreaming } from "./replication.ts";
import { writeOpenHba } from "./server-config.ts";
import type { AgentCA } from "./tls.ts";
import { assertVerifier } from "./validate.ts";

/**
 * TLS admission: customers get in only after the instance holds the current
 * verifier, and a start counts as done only once a TLS login over TCP reaches
 * SCRAM — the way customers will connect.
 */

const ADMIT_TIMEOUT_MS = 10_000;

const alterPassword = (c: pg.Client, verifier: string) =>
  // Utility statements take no bind parameters; escapeLiteral quotes safely.
  c.query(`ALTER ROLE ${ADMIN_ROLE} PASSWORD ${c.escapeLiteral(verifier)}`);

/**
 * ALTER ROLE with the verifier (and the replication role's derived
 * password), open pg_hba.conf, have the proxy serve the published port
 * (forwarding to the server's `privatePort`), and wait until TLS logins
 * through it reach SCRAM. A replica's roles are its primary's (it is read-only):
 * nothing is altered, and it is admitted once it also streams.
 */
export async function admitClients(host: Host, id: string, o: InstanceSettings, ca: AgentCA, privatePort: number): Promise<void> {
  const dir = host.instanceDir(id);
  const sock = host.socketDir;
  const loadedBefore = await withAgentClient(sock, o.port, async (c) => {
    if (!o.replica) {
      await alterPassword(c, o.scramVerifier);
      await ensureReplicationRole(c, host.replicationSecret, id);
    }
    const r = await c.query<{ t: string }>("SELECT pg_conf_load_time()::text AS t");
    return r.rows[0]!.t;
  });
  await writeOpenHba(host, dir);
  await withAgentClient(sock, o.port, (c) => c.query("SELECT pg_reload_conf()"));
  // New sessions inherit the postmaster's reload time, so a changed value
  // proves the postmaster has processed the reload (and the new pg_hba.conf).
  const deadline = Date.now() + ADMIT_TIMEOUT_MS;
  for (;;) {
    const t = await withAgentClient(
      sock,
      o.port,
      async (c) => (await c.query<{ t: string }>("SELECT pg_conf_load_time()::text AS t")).rows[0]!.t,
    );
    if (t !== loadedBefore) break;
    if (Date.now() > deadline) throw new Error(`instance ${id}: configuration reload not observed within 10 s`);
    await sleep(10);
  }
  await host.proxy.serve(id, { port: o.port, target: { host: host.privateAddress, port: privatePort } });
  let lastErr: unknown;
  for (;;) {
    try {
      await probeTlsLogin({
        host: host.probeHost,
        port: o.port,
        caPem: ca.certPem,
        hostname: o.hostname,
        user: ADMIN_ROLE,
        database: DEFAULT_DATABASE,
      });
      break;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() > deadline) throw new Error(`instance ${id}: not reachable over TLS on ${host.probeHost}:${o.port}: ${errMsg(lastErr)}`);
    await sleep(25);
  }
  if (o.replica) {
    await waitStreaming(
      () =>
        withAgentClient(
          sock,
          o.port,
          async (c) => (await c.query<{ status: string }>("SELECT status FROM pg_stat_wal_receiver")).rows[0]?.status,
        ),
      id,
      () => tail(host.logPath(id), 4000),
    );
  }
}

/** Sets dbadmin's verifier on a running instance; the caller holds the instance's turn. */
export async function setPassword(host: Host, id: string, verifier: string): Promise<void> {
  assertVerifier(verifier);
  const pf = await readPidFile(host.instanceDir(id));
  const obs = await observeInstance(host, id);
  if (obs.state !== "running" || !pf?.port || !pf.socketDir)
    throw new Error(`instance ${id} is not running (${obs.state}${obs.message ? `: ${obs.message}` : ""})`);
  await withAgentClient(pf.socketDir, pf.port, (c) => alterPassword(c, verifier));
  host.log(`instance ${id}: password updated`);
}
