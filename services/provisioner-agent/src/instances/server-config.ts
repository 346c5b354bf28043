import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { InstanceSettings } from "../runtime.ts";
import { AGENT_SUPERUSER } from "./agent-socket.ts";
import { mkdir } from "node:fs/promises";
import { chownNoFollow, readOwned, writeOwned } from "./files.ts";
import type { Host } from "./host.ts";
import type { RunAsIdentity } from "./run-as.ts";
import { publishedPortLine } from "./private-address.ts";
import { hbaReplication, standbyFloors, standbySettings } from "./replication.ts";
import { tierSettings } from "./tier-settings.ts";
import { CUSTOMER_DEFAULTS } from "./parameters.ts";
import { isTierName, TIER_LOG_QUOTA_MB } from "@dbaas/catalogue";

/**
 * Configuration rendering: the agent's own settings file (`dbaas.conf`,
 * included from postgresql.conf) and the two pg_hba.conf variants. Written
 * before every start, so a start always runs with the settings it was given.
 */

/** The line every data directory's postgresql.conf carries (templates get it at build time). */
export const INCLUDE_LINE = "include_if_exists = 'dbaas.conf'";
const INCLUDE_RE = /^\s*include_if_exists\s*=\s*'dbaas\.conf'/m;

/**
 * The per-instance part of the archive settings. It is a file of its own
 * because {@link renderConfig} sees only the settings, not the instance, and
 * its text is what decides whether a running server must restart.
 */
const ARCHIVE_CONF = "dbaas-archive.conf";

/**
 * A primary's synchronous_standby_names, in a file of its own for the same
 * reason: it changes while the server runs (a standby starts or stops
 * streaming) and takes a reload, never a restart. Written at every start, so
 * a standby's copy of its old primary's (a base backup carries the data
 * directory) never outlives its promotion's first start.
 */
export const SYNC_CONF = "dbaas-sync.conf";

/** The text of {@link SYNC_CONF}. */
export const renderSyncConf = (names: string) => `synchronous_standby_names = ${confValue(names)}\n`;

/**
 * Storage full (docs/product.md, Storage per tier): `default_transaction_read_only` in a file of its own,
 * changed with a reload and kept across restarts (not rewritten at a start). Not ALTER SYSTEM: the
 * customer's configuration owns postgresql.auto.conf and rewrites it whole (parameters.ts), which would
 * make a full database writable again.
 */
export const READ_ONLY_CONF = "dbaas-read-only.conf";

/** The text of {@link READ_ONLY_CONF}. */
export const renderReadOnlyConf = (readOnly: boolean) => (readOnly ? "default_transaction_read_only = on\n" : "");

/**
 * The agent's own connections: `peer` over the server's unix socket, and
 * pg_ident.conf maps only the agent's OS user to the agent's role. Nothing is
 * `trust`: a tenant's process on the socket (its own server's: the only one
 * it can enter) is another OS user and is refused, and TCP is `reject`ed for
 * the agent's role. As root the agent is `root`; unprivileged (compose, k8s),
 * its own user, which must have a passwd entry (peer looks the client's uid up).
 */
const IDENT_MAP = "dbaas";
let agentOsUser: string | undefined;
export function agentUserName(): string {
  if (agentOsUser) return agentOsUser;
  try {
    agentOsUser = os.userInfo().username;
  } catch {
    throw new Error(`the agent's uid ${process.getuid?.()} has no passwd entry: peer authentication to its servers needs a user name`);
  }
  return agentOsUser;
}

/** pg_ident.conf: the agent's OS user, and only it, is the agent's role. */
export const renderIdent = () => `# Managed by the dbaas agent. Do not edit.
${IDENT_MAP}  ${agentUserName()}  ${AGENT_SUPERUSER}
`;

const agentLines = () => `local   all          ${AGENT_SUPERUSER}  peer map=${IDENT_MAP}
local   replication  ${AGENT_SUPERUSER}  peer map=${IDENT_MAP}
`;

/**
 * While the instance starts, only the agent may connect: a restarted instance
 * must not accept logins before it has been given the current password.
 */
export const lockedHba = () => `# Managed by the dbaas agent (locked during start). Do not edit.
${agentLines()}`;

/**
 * Where customers log in from: anywhere when clients' own addresses arrive (the nftables meter, whose kernel guard
 * keeps direct connections off the private port); only the userspace proxy's address otherwise (its guard:
 * connection-proxy.ts, proxySourceAddress).
 */
function customerLines(host: Host): string {
  const src = host.proxy.sourceAddress;
  if (!src) return "hostssl all  all          0.0.0.0/0  scram-sha-256\nhostssl all  all          ::/0       scram-sha-256\n";
  return `hostssl all  all          ${src}/${net.isIPv6(src) ? 128 : 32}  scram-sha-256\n`;
}

/**
 * A fenced primary (fencing.ts): the agent, and its standbys and replicas
 * streaming from it, but no client session: it takes no writes.
 */
export const fencedHba = (host: Host) => `# Managed by the dbaas agent (fenced: no lease on this primary). Do not edit.
${agentLines()}${hbaReplication(host.privateNetwork)}
`;

// "all" does not match replication connections: base backups need their own line.
// The pooler (pooler.ts) comes over the server's own socket, whose directory only the server's user (its
// own, and PgBouncer's) can enter, and logs in with SCRAM like any customer.
export const openHba = (host: Host) => `# Managed by the dbaas agent. Do not edit.
${agentLines()}local   all  all          scram-sha-256
host    all  ${AGENT_SUPERUSER}  all        reject
${customerLines(host)}host    all  all          all        reject
${hbaReplication(host.privateNetwork)}
`;

/** The name PostgreSQL gives each log file (strftime in log_timezone, UTC); jsonlog writes it with `.json`. */
export const LOG_FILENAME = "postgresql-%Y%m%d-%H%M%S.log";

/** The server log's size quota for `tier` (the smallest tier's for an unknown one). */
export function logQuotaBytes(tier: string): number {
  return (isTierName(tier) ? TIER_LOG_QUOTA_MB[tier] : TIER_LOG_QUOTA_MB.micro) * 1024 * 1024;
}

/**
 * The server log (docs/product.md, Inside the database): jsonlog by the logging collector into the instance's log
 * directory, owned by the server's user, a new file every hour or at an eighth of the tier's quota (at most 64 MB),
 * so the agent's pruning (inside/logs.ts) can drop whole files, oldest first. Timestamps and file names in UTC. What
 * could carry a secret is off and on no allowlist: statements (`ALTER ROLE … PASSWORD`) are never logged as such,
 * connections are not logged, and pg_stat_statements keeps no utility statement (it does not normalize their literals).
 */
export function loggingSettings(logDir: string, tier: string): Record<string, string> {
  const rotationKb = Math.min(64 * 1024, Math.floor(logQuotaBytes(tier) / 8 / 1024));
  return {
    logging_collector: "on",
    log_destination: "jsonlog",
    log_directory: logDir,
    log_filename: LOG_FILENAME,
    log_file_mode: "0600",
    log_rotation_age: "60",
    log_rotation_size: String(rotationKb),
    log_truncate_on_rotation: "off",
    log_timezone: "UTC",
    log_statement: "none",
    log_connections: "off",
    log_disconnections: "off",
    log_replication_commands: "off",
    "pg_stat_statements.track_utility": "off",
  };
}

/** postgresql.conf string literal. */
function confValue(v: string): string {
  return `'${v.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
}

/**
 * The whole of `dbaas.conf` for these settings, the server listening on
 * `privatePort` (private-address.ts; clients reach instance `id` through the
 * proxy on `o.port`, which the file records); equal text means the server runs with
 * equal settings. A replica's standby settings (its primary's address) are
 * part of it, so a primary that moved makes the replica restart; its
 * hot-standby-critical settings are the largest tier's (replication.ts).
 */
export function renderConfig(host: Host, id: string, o: InstanceSettings, privatePort: number): string {
  const settings: Record<string, string> = {
    port: String(privatePort),
    listen_addresses: host.privateAddress,
    unix_socket_directories: host.serverSocketDir(id),
    // Only the server's own user (and root) may open the socket; peer admits the agent alone.
    unix_socket_permissions: "0700",
    ssl: "on",
    ssl_cert_file: "server.crt",
    ssl_key_file: "server.key",
    ssl_min_protocol_version: "TLSv1.2",
    password_encryption: "scram-sha-256",
    // Hundreds of small instances: never try to reserve huge pages.
    huge_pages: "off",
    // Crash recovery starts with one syncfs() of the data directory's filesystem, not an fsync of each of its
    // files: seconds saved after a kill -9 on a busy host (measured on the metadata server: docs/decisions.md).
    recovery_init_sync_method: "syncfs",
    ...tierSettings(o.tier, os.totalmem()),
    ...CUSTOMER_DEFAULTS,
    ...loggingSettings(host.serverLogDir(id), o.tier),
    // Continuous archiving into the instance's spool (dbaas-archive.conf names
    // it), which the agent uploads from; archive_timeout (BACKUP_ARCHIVE_TIMEOUT_S)
    // bounds how far the latest restorable instant trails a busy database (the RPO target is 90 s).
    wal_level: "replica",
    max_wal_senders: "10",
    archive_mode: "on",
    archive_library: "basic_archive",
    archive_timeout: String(host.archiveTimeoutS),
  };
  const lines = Object.entries(o.replica ? standbyFloors(settings) : settings).map(([k, v]) => `${k} = ${confValue(v)}`);
  if (o.replica) lines.push(...standbySettings(host, id, o.replica));
  // A standby of a highly available database is never served to clients (resumeServing reads this line).
  const unpublished = o.unpublished ? `${UNPUBLISHED_LINE}\n` : "";
  return `# Managed by the dbaas agent; rewritten on every start. Do not edit.\n# tier: ${o.tier}\n${publishedPortLine(id, o.port)}\n${unpublished}${lines.join("\n")}\ninclude = ${confValue(ARCHIVE_CONF)}\ninclude_if_exists = ${confValue(SYNC_CONF)}\ninclude_if_exists = ${confValue(READ_ONLY_CONF)}\n`;
}

export const configPath = (dir: string) => path.join(dir, "dbaas.conf");

/** dbaas.conf's mark of a server whose port is never served (a standby). */
const UNPUBLISHED_LINE = "# unpublished: a standby, never served to clients";

/** Whether the instance's dbaas.conf marks it unpublished. */
export async function isUnpublished(dir: string): Promise<boolean> {
  return (await readOwned(undefined, configPath(dir)).catch(() => "")).includes(UNPUBLISHED_LINE);
}

/** The private port the instance's `dbaas.conf` last gave its server, if any (choosePrivatePort prefers it). */
export async function lastPrivatePort(dir: string): Promise<number | undefined> {
  const m = /^port = '(\d+)'$/m.exec(await readOwned(undefined, configPath(dir)).catch(() => ""));
  return m ? Number(m[1]) : undefined;
}

/**
 * The instance's WAL spool: owned by the server's user (basic_archive writes
 * there), inside an agent-owned root. Created here, never emptied: the archiver
 * closes it (mode 0500) while it is over its bound, and reopens it. A spool
 * another user owns (a promoted replica's data keeps the replica's user) is
 * given to the server's.
 */
async function ensureSpool(spool: string, user: RunAsIdentity): Promise<void> {
  try {
    await mkdir(spool, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  }
  // The mode is the archiver's (0500 while closed); the owner is changed on an O_NOFOLLOW descriptor (a link is
  // refused). Something else in its place (only root can put it there) starts the server with archiving failing.
  if (user.switchUser) await chownNoFollow(spool, user);
}

/** Settings, the include line and the locked pg_hba.conf, ready for a start of a server running as `user`. */
export async function writeStartConfig(host: Host, dir: string, conf: string, user: RunAsIdentity, syncNames = ""): Promise<void> {
  const spool = host.spoolDir(path.basename(dir));
  await ensureSpool(spool, user);
  await writeOwned(user, path.join(dir, ARCHIVE_CONF), `basic_archive.archive_directory = ${confValue(spool)}\n`);
  await writeOwned(user, path.join(dir, SYNC_CONF), renderSyncConf(syncNames));
  await writeOwned(user, configPath(dir), conf);
  const pgConf = path.join(dir, "postgresql.conf");
  // Not through a link the server's user planted: its content would be written back where that user reads it.
  const pgConfText = await readOwned(user, pgConf);
  if (!INCLUDE_RE.test(pgConfText)) await writeOwned(user, pgConf, `${pgConfText}\n${INCLUDE_LINE}\n`);
  await writeOwned(user, path.join(dir, "pg_ident.conf"), renderIdent());
  await writeOwned(user, path.join(dir, "pg_hba.conf"), lockedHba());
}

/** pg_hba.conf of a fenced primary (no client sessions); takes effect on the next reload. */
export async function writeFencedHba(host: Host, dir: string, user: RunAsIdentity): Promise<void> {
  await writeOwned(user, path.join(dir, "pg_hba.conf"), fencedHba(host));
}

/** pg_hba.conf that lets customers in (TLS + SCRAM only); takes effect on the next reload. */
export async function writeOpenHba(host: Host, dir: string, user: RunAsIdentity): Promise<void> {
  await writeOwned(user, path.join(dir, "pg_hba.conf"), openHba(host));
}
