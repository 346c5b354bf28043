import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import type { InstanceSettings } from "../runtime.ts";
import { ADMIN_ROLE, DEFAULT_DATABASE, withAgentClient } from "./agent-socket.ts";
import { errMsg, tail } from "./files.ts";
import type { Host } from "./host.ts";
import { observeInstance, readPidFile } from "./observe.ts";
import { probeTlsLogin } from "./probe.ts";
import { ensureReplicationRole, waitStreaming } from "./replication.ts";
import { fenceInstance } from "./fencing.ts";
import { writeFencedHba, writeOpenHba } from "./server-config.ts";
import type { AgentCA } from "./tls.ts";
import { assertVerifier } from "./validate.ts";
import { divergenceInLog } from "../timeline-divergence.ts";

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
 * nothing is altered, and it is admitted once it also streams. A standby of a
 * highly available database is not served (probed on its private address);
 * a fenced primary admits no client (its start ends without the TLS probe).
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
  // A fenced primary (no lease: fencing.ts) comes up with the agent and replication only.
  const fenced = host.fenced.has(id);
  const user = await host.serverUser(id);
  if (fenced) await writeFencedHba(host, dir, user);
  else await writeOpenHba(host, dir, user);
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
  // A standby of a highly available database is never served: its start is proven on its private address.
  if (!o.unpublished) await host.proxy.serve(id, { port: o.port, target: { host: host.privateAddress, port: privatePort } });
  if (!fenced) {
    const target = o.unpublished ? { host: host.privateAddress, port: privatePort } : { host: host.probeHost, port: o.port };
    let lastErr: unknown;
    for (;;) {
      try {
        await probeTlsLogin({ ...target, caPem: ca.certPem, hostname: o.hostname, user: ADMIN_ROLE, database: DEFAULT_DATABASE });
        break;
      } catch (e) {
        lastErr = e;
      }
      if (Date.now() > deadline)
        throw new Error(`instance ${id}: not reachable over TLS on ${target.host}:${target.port}: ${errMsg(lastErr)}`);
      await sleep(25);
    }
    // Fenced while it was being admitted (the lease ended meanwhile): closed again.
    if (host.fenced.has(id)) await fenceInstance(host, id);
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
      () => divergenceInLog(host.serverLogDir(id)),
    );
  }
}

/** How long a replica's agent waits for a new verifier to arrive by replication. */
const REPLICATED_VERIFIER_TIMEOUT_MS = 60_000;

/**
 * Sets dbadmin's verifier on a running instance and ends the sessions dbadmin
 * has open: "the previous password is invalid immediately" covers sessions
 * opened with it. A replica (in recovery: read-only) gets the verifier by
 * replication; its agent waits until it has replayed it, then ends the
 * sessions there. The caller holds the instance's turn.
 */
export async function setPassword(host: Host, id: string, verifier: string): Promise<void> {
  assertVerifier(verifier);
  const pf = await readPidFile(host.instanceDir(id), host.serverSocketDir(id));
  const obs = await observeInstance(host, id);
  if (obs.state !== "running" || !pf?.port || !pf.socketDir)
    throw new Error(`instance ${id} is not running (${obs.state}${obs.message ? `: ${obs.message}` : ""})`);
  const ended = await withAgentClient(pf.socketDir, pf.port, async (c) => {
    if ((await c.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r")).rows[0]!.r) await awaitReplicatedVerifier(c, id, verifier);
    else await alterPassword(c, verifier);
    const { rows } = await c.query<{ n: number }>(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE usename = $1 AND pid <> pg_backend_pid()`,
      [ADMIN_ROLE],
    );
    return rows[0]!.n;
  });
  host.log(`instance ${id}: password updated; ${ended} open session(s) of ${ADMIN_ROLE} ended`);
}

/** Polls a standby's pg_authid until dbadmin's verifier is `verifier` (replayed from its primary). */
async function awaitReplicatedVerifier(c: pg.Client, id: string, verifier: string): Promise<void> {
  const deadline = Date.now() + REPLICATED_VERIFIER_TIMEOUT_MS;
  for (;;) {
    const { rows } = await c.query<{ v: string | null }>("SELECT rolpassword AS v FROM pg_authid WHERE rolname = $1", [ADMIN_ROLE]);
    if (rows[0]?.v === verifier) return;
    if (Date.now() > deadline)
      throw new Error(`instance ${id}: the new password has not arrived by replication within ${REPLICATED_VERIFIER_TIMEOUT_MS / 1000} s`);
    await sleep(100);
  }
}
