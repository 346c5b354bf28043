import { readFile } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { AGENT_SUPERUSER, withAgentClient } from "./agent-socket.ts";
import type { Host } from "./host.ts";
import { observeInstance, readPidFile } from "./observe.ts";
import { fencedHba, renderSyncConf, SYNC_CONF, writeFencedHba, writeOpenHba } from "./server-config.ts";
import { writeOwned } from "./files.ts";

/*
 * Fencing a highly available primary (docs/product.md, High availability): its agent holds a lease on it and,
 * when it cannot renew it, fences the server before the lease ends, so an old primary cut off from the control
 * plane never takes a write once a standby may have been promoted. Fenced = pg_hba.conf admits the agent and
 * replication only (the standbys keep streaming, so they receive all it wrote) and every client session is
 * ended; the server keeps running, so unfencing (the lease renewed) is a reload, not a start. Stronger than
 * default_transaction_read_only, which a session may override.
 */

const RELOAD_TIMEOUT_MS = 5000;

/** The running server's own socket and port (postmaster.pid), or undefined when none runs. */
async function running(host: Host, id: string): Promise<{ sock: string; port: number } | undefined> {
  const obs = await observeInstance(host, id);
  if (obs.state !== "running") return undefined;
  const pf = await readPidFile(host.instanceDir(id), host.serverSocketDir(id));
  return pf?.port && pf.socketDir ? { sock: pf.socketDir, port: pf.port } : undefined;
}

/**
 * Reloads the configuration and waits until the postmaster has (a new session sees the new load time). `then`
 * runs on the same session right after the reload was asked for, before the wait.
 */
async function reload(sock: string, port: number, id: string, then?: (c: pg.Client) => Promise<unknown>): Promise<void> {
  const loadTime = async () =>
    withAgentClient(sock, port, async (c) => (await c.query<{ t: string }>("SELECT pg_conf_load_time()::text AS t")).rows[0]!.t);
  const before = await withAgentClient(sock, port, async (c) => {
    const t = (await c.query<{ t: string }>("SELECT pg_conf_load_time()::text AS t")).rows[0]!.t;
    await c.query("SELECT pg_reload_conf()");
    await then?.(c);
    return t;
  });
  const deadline = Date.now() + RELOAD_TIMEOUT_MS;
  while ((await loadTime()) === before) {
    if (Date.now() > deadline) throw new Error(`instance ${id}: configuration reload not observed within ${RELOAD_TIMEOUT_MS / 1000} s`);
    await sleep(10);
  }
}

/** Ends every client session (not the agent's, not walsenders); answers how many. */
const endClientSessions = (c: pg.Client) =>
  c.query<{ n: number }>(
    `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
     WHERE backend_type = 'client backend' AND usename IS DISTINCT FROM $1 AND pid <> pg_backend_pid()`,
    [AGENT_SUPERUSER],
  );

/**
 * Fences instance `id` from now on (host.fenced); if it runs: its pg_hba.conf
 * made the fenced one and reloaded (when it was not already), then its client
 * sessions ended (every call: a session that slipped in during a start's
 * admission goes too). Answers how many sessions were ended, or undefined
 * when no server runs.
 */
export async function fenceInstance(host: Host, id: string): Promise<number | undefined> {
  host.fenced.add(id);
  const at = await running(host, id);
  if (!at) return undefined;
  const dir = host.instanceDir(id);
  const hba = await readFile(path.join(dir, "pg_hba.conf"), "utf8").catch(() => "");
  if (hba !== fencedHba(host)) {
    await writeFencedHba(host, dir, await host.serverUser(id));
    // The sessions end at once, on the session that asked for the reload: seeing the reload done takes new
    // sessions, seconds on a loaded host, and the lease does not wait. Those that came in meanwhile end below.
    await reload(at.sock, at.port, id, endClientSessions);
    host.log(`instance ${id}: fenced (no client sessions)`);
  }
  const { rows } = await withAgentClient(at.sock, at.port, endClientSessions);
  return rows[0]!.n;
}

/** Lets clients into instance `id` again: when it runs fenced, its open pg_hba.conf back and reloaded. */
export async function unfenceInstance(host: Host, id: string): Promise<void> {
  if (!host.fenced.delete(id)) return;
  const at = await running(host, id);
  if (!at) return;
  const dir = host.instanceDir(id);
  const hba = await readFile(path.join(dir, "pg_hba.conf"), "utf8").catch(() => "");
  // Only a fenced one: a server still starting (locked pg_hba) is opened by its admission.
  if (hba !== fencedHba(host)) return;
  await writeOpenHba(host, dir, await host.serverUser(id));
  await reload(at.sock, at.port, id);
  host.log(`instance ${id}: unfenced (clients admitted again)`);
}

/**
 * The standbys of `names` (`ANY 1 ("a", "b")`, the spec's) that are in `streaming`, as a setting of their own:
 * `ANY 1 (…)` of those, or "" when none streams.
 */
export function streamingOnly(names: string, streaming: ReadonlySet<string>): string {
  const live = [...names.matchAll(/"([^"]+)"/g)].map((m) => m[1]!).filter((n) => streaming.has(n));
  return live.length === 0 ? "" : `ANY 1 (${live.map((n) => `"${n}"`).join(", ")})`;
}

/**
 * A running primary's synchronous_standby_names: of the standbys the spec names, those that stream from it now
 * (pg_stat_replication) — its file rewritten and the configuration reloaded when that differs from what the
 * server runs with. A standby the control plane counts as running may not stream from this server: right after
 * a failover the other standbys still follow the old primary (or cannot follow the new one's timeline), and a
 * primary waiting for one of them would take no write at all. Answers the setting applied.
 */
export async function applySynchronousStandbys(host: Host, id: string, names: string): Promise<string> {
  const at = await running(host, id);
  if (!at) throw new Error(`instance ${id} is not running`);
  const { current, streaming } = await withAgentClient(at.sock, at.port, async (c) => ({
    current: (await c.query<{ v: string }>("SELECT current_setting('synchronous_standby_names') AS v")).rows[0]!.v,
    streaming: new Set(
      (await c.query<{ name: string }>("SELECT application_name AS name FROM pg_stat_replication WHERE state = 'streaming'")).rows.map(
        (r) => r.name,
      ),
    ),
  }));
  const wanted = streamingOnly(names, streaming);
  if (current === wanted) return wanted;
  await writeOwned(await host.serverUser(id), path.join(host.instanceDir(id), SYNC_CONF), renderSyncConf(wanted));
  await reload(at.sock, at.port, id);
  host.log(`instance ${id}: synchronous_standby_names = '${wanted}'`);
  return wanted;
}
