import { createHmac } from "node:crypto";
import { mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { scramVerifier, verifiesScram } from "@dbaas/kit";
import type pg from "pg";
import type { ReplicaConnection } from "../runtime.ts";
import { ensureOwnedDir, removeTree, writeOwned } from "./files.ts";
import type { Host } from "./host.ts";
import { TIER_NAMES, tierSettings } from "./tier-settings.ts";

/**
 * Streaming replication between the agent's instances (docs/product.md, Read
 * replicas). A primary keeps a LOGIN REPLICATION role whose password is
 * derived from the region's AGENT_REPLICATION_SECRET and the primary's id, so
 * every agent of the region can compute it and none stores it; one physical
 * slot per replica (`dbaas_<replica id>`) holds the WAL the replica has not
 * received. A replica is a hot standby whose conninfo names the primary's
 * private address, verifies its certificate with the primary agent's CA and
 * reads the password from a passfile outside its data directory (a base
 * backup of a promoted replica must not carry it).
 */

export const REPLICATION_ROLE = "dbaas_replication";
/** Prefix of the slots the agent owns: any other slot on an instance is left alone. */
export const SLOT_PREFIX = "dbaas_";
const SLOT_RE = /^dbaas_[a-z0-9_]{1,57}$/;

/** base64url(HMAC-SHA256(secret, primary id)): the replication role's password on that primary. */
export function replicationPassword(secret: string, primaryId: string): string {
  return createHmac("sha256", secret).update(primaryId).digest("base64url");
}

/** pg_hba line that lets replicas of this primary stream over TLS from the private network (AGENT_PRIVATE_NETWORK). */
export const hbaReplication = (privateNetwork: string) => `hostssl replication ${REPLICATION_ROLE} ${privateNetwork} scram-sha-256`;

/**
 * Creates the replication role if missing and gives it the current derived
 * password unless it has it already. Without a secret the agent cannot serve
 * replicas: the role is left without a password (no replica can log in)
 * rather than failing the primary. A slot sync and a base backup may get here
 * at once, and two concurrent changes of one role fail ("tuple concurrently
 * updated"): an advisory lock takes them in turn, and the second finds
 * nothing to change.
 */
export async function ensureReplicationRole(c: pg.Client, secret: string | undefined, primaryId: string): Promise<void> {
  await c.query("BEGIN");
  try {
    await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [REPLICATION_ROLE]);
    const { rows } = await c.query<{ pw: string | null }>("SELECT rolpassword AS pw FROM pg_authid WHERE rolname = $1", [REPLICATION_ROLE]);
    if (rows.length === 0) await c.query(`CREATE ROLE ${REPLICATION_ROLE} LOGIN REPLICATION`);
    const password = secret && replicationPassword(secret, primaryId);
    if (password && !verifiesScram(rows[0]?.pw, password)) {
      await c.query(`ALTER ROLE ${REPLICATION_ROLE} PASSWORD ${c.escapeLiteral(scramVerifier(password))}`);
    }
    await c.query("COMMIT");
  } catch (e) {
    await c.query("ROLLBACK").catch(() => {});
    throw e;
  }
}

/**
 * Makes the instance's `dbaas_` slots exactly `wanted`: missing ones are
 * created reserving WAL at once, others are dropped after their walsender is
 * ended (a slot holds WAL until it goes, and fills the disk).
 */
export async function syncSlots(c: pg.Client, wanted: readonly string[]): Promise<{ created: string[]; dropped: string[] }> {
  for (const s of wanted) if (!SLOT_RE.test(s)) throw new Error(`invalid replication slot name ${JSON.stringify(s)}`);
  const { rows } = await c.query<{ slot_name: string }>(
    "SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'physical' AND starts_with(slot_name, $1)",
    [SLOT_PREFIX],
  );
  const have = new Set(rows.map((r) => r.slot_name));
  const created = wanted.filter((s) => !have.has(s));
  const dropped = [...have].filter((s) => !wanted.includes(s));
  for (const s of created) {
    // Another session may create it at the same moment (a backup's ensure beside a converge): "already exists" is fine.
    await c.query("SELECT pg_create_physical_replication_slot($1, true)", [s]).catch((e: { code?: string }) => {
      if (e.code !== "42710") throw e;
    });
  }
  for (const s of dropped) await dropSlot(c, s);
  return { created, dropped };
}

/**
 * A standby's slots for the other members of its primary (its replicas and the other standbys), kept as Patroni
 * and CloudNativePG keep them: each created reserving WAL, then advanced to the start of the WAL segment where
 * that member last reported its WAL (never past what this standby has replayed, and never backwards), so that
 * once this standby is promoted it still has the WAL they need to follow it — instead of a re-seed because the
 * new primary had recycled it. Every other `dbaas_` slot is dropped. A member that reported nothing yet
 * (position 0) keeps its slot where it was created.
 */
export async function holdSlots(
  c: pg.Client,
  wanted: readonly { name: string; position: bigint }[],
): Promise<{ created: string[]; dropped: string[] }> {
  const changed = await syncSlots(
    c,
    wanted.map((w) => w.name),
  );
  for (const w of wanted) {
    if (w.position <= 0n) continue;
    // pg_replication_slot_advance refuses to go backwards; on a standby it stops at the replayed position itself.
    await c.query(
      `SELECT pg_replication_slot_advance(slot_name, target)
         FROM (SELECT slot_name, restart_lsn,
                      '0/0'::pg_lsn + ($2::numeric - $2::numeric % (SELECT setting::numeric FROM pg_settings WHERE name = 'wal_segment_size')) AS target
                 FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NULL) s
        WHERE restart_lsn IS NOT NULL AND restart_lsn < LEAST(target, COALESCE(pg_last_wal_replay_lsn(), target))`,
      [w.name, w.position.toString()],
    );
  }
  return changed;
}

async function dropSlot(c: pg.Client, slot: string): Promise<void> {
  for (let i = 0; ; i++) {
    await c.query("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", [
      slot,
    ]);
    try {
      await c.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", [slot]);
      return;
    } catch (e) {
      // 55006: still active (the walsender had not exited yet, or the replica reconnected).
      if ((e as { code?: string }).code !== "55006" || i >= 50) throw e;
      await sleep(100);
    }
  }
}

/** Where a replica's passfile and the primary's CA live: agent data, not the instance's data directory. */
export const replicationFilesDir = (host: Host, id: string) => path.join(host.root, "replication", id);

/** postgresql.conf string literal. */
const lit = (v: string) => `'${v.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;

/** A conninfo value (single-quoted, backslash-escaped). */
const connValue = (v: string) => `'${v.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/** The standby settings of replica `id` (part of dbaas.conf, so a changed primary port restarts it). */
export function standbySettings(host: Host, id: string, r: ReplicaConnection): string[] {
  const dir = replicationFilesDir(host, id);
  const conninfo = [
    `host=${connValue(r.primaryHost)}`,
    `hostaddr=${connValue(r.primaryAddress)}`,
    `port=${r.primaryPort}`,
    `user=${REPLICATION_ROLE}`,
    `passfile=${connValue(path.join(dir, "passfile"))}`,
    "sslmode=verify-full",
    `sslrootcert=${connValue(path.join(dir, "primary-ca.pem"))}`,
    `application_name=${connValue(id)}`,
  ].join(" ");
  // wal_retrieve_retry_interval: PostgreSQL's 5 s default is how long a replica waits before reconnecting after
  // its primary restarted or its walreceiver died; 1 s catches up sooner at the cost of a log line a second
  // while the primary is down.
  return [
    `primary_conninfo = ${lit(conninfo)}`,
    `primary_slot_name = ${lit(r.slotName)}`,
    "hot_standby = 'on'",
    "wal_retrieve_retry_interval = '1s'",
  ];
}

/** The passfile (the derived password) and the primary's CA, readable by the replica's server only. */
export async function writeReplicaFiles(host: Host, id: string, r: ReplicaConnection): Promise<void> {
  if (!host.replicationSecret) throw new Error(`replica ${id}: AGENT_REPLICATION_SECRET is not set on this agent; it cannot stream`);
  const dir = replicationFilesDir(host, id);
  await mkdir(path.dirname(dir), { recursive: true, mode: 0o711 });
  const user = await host.serverUser(id);
  await ensureOwnedDir(dir, user);
  // passfile fields escape ':' and '\'.
  const esc = (v: string) => v.replace(/\\/g, "\\\\").replace(/:/g, "\\:");
  const password = replicationPassword(host.replicationSecret, r.primaryDatabaseId);
  await writeOwned(user, path.join(dir, "passfile"), `*:*:*:${esc(REPLICATION_ROLE)}:${esc(password)}\n`);
  await writeOwned(user, path.join(dir, "primary-ca.pem"), r.primaryCaPem);
}

export async function removeReplicaFiles(host: Host, id: string): Promise<void> {
  await removeTree(replicationFilesDir(host, id));
}

/** PostgreSQL's own marker of a standby. */
export const standbySignalPath = (dataDir: string) => path.join(dataDir, "standby.signal");

const STREAM_TIMEOUT_MS = 30_000;

/**
 * Waits until the replica's WAL receiver streams from its primary; the
 * failure names what the server log says (auth, TLS, slot, unreachable).
 */
export async function waitStreaming(
  query: () => Promise<string | undefined>,
  id: string,
  logTail: () => Promise<string>,
  diverged: () => Promise<string | undefined> = async () => undefined,
): Promise<void> {
  const deadline = Date.now() + STREAM_TIMEOUT_MS;
  let status: string | undefined;
  for (let i = 0; ; i++) {
    status = await query();
    if (status === "streaming") return;
    // One that can never follow its primary says so in its log: no use waiting (the reconciler re-seeds it).
    const why = i % 10 === 9 ? await diverged() : undefined;
    if (why) throw new Error(`replica ${id}: cannot follow its primary: ${why}`);
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  const tail = await logTail();
  const reason = [...tail.matchAll(/(?:FATAL|ERROR):\s+(.*)/g)].map((m) => m[1]).pop();
  throw new Error(
    `replica ${id}: not streaming from its primary after ${STREAM_TIMEOUT_MS / 1000} s (WAL receiver ${status ?? "not running"})` +
      `${reason ? `: ${reason}` : ""}\n--- server log ---\n${tail}`,
  );
}

/**
 * Settings a hot standby must hold at least at its primary's values (they
 * size the shared memory that tracks the primary's transactions and locks):
 * below them PostgreSQL refuses to start the standby, and when a running
 * primary raises them (a resize) it pauses the standby's replay until a
 * restart. A replica therefore runs them at the largest tier's values, so it
 * follows its primary through every resize without a restart; they cost a
 * little shared memory, nothing else.
 */
const HOT_STANDBY_CRITICAL = ["max_connections", "max_worker_processes"] as const;

/** `settings` of a replica, the hot-standby-critical ones raised to the largest tier's. */
export function standbyFloors(settings: Record<string, string>): Record<string, string> {
  const out = { ...settings };
  for (const name of HOT_STANDBY_CRITICAL) {
    const largest = Math.max(...TIER_NAMES.map((t) => Number(tierSettings(t, os.totalmem())[name])));
    if (!(Number(out[name]) >= largest)) out[name] = String(largest);
  }
  return out;
}
