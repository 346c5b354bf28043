import { chown, mkdir, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { InstanceSettings } from "../runtime.ts";
import { AGENT_SUPERUSER } from "./agent-socket.ts";
import { writeOwned } from "./files.ts";
import type { Host } from "./host.ts";
import { publishedPortLine } from "./private-address.ts";
import { hbaReplication, standbyFloors, standbySettings } from "./replication.ts";
import { tierSettings } from "./tier-settings.ts";

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
 * While the instance starts, only the agent may connect: a restarted instance
 * must not accept logins before it has been given the current password.
 */
const HBA_LOCKED = `# Managed by the dbaas agent (locked during start). Do not edit.
local all ${AGENT_SUPERUSER} trust
local replication ${AGENT_SUPERUSER} trust
`;
// "all" does not match replication connections: base backups need their own line.
export const openHba = (host: Host) => `# Managed by the dbaas agent. Do not edit.
local   all          ${AGENT_SUPERUSER}  trust
local   replication  ${AGENT_SUPERUSER}  trust
host    all  ${AGENT_SUPERUSER}  all        reject
hostssl all  all          0.0.0.0/0  scram-sha-256
hostssl all  all          ::/0       scram-sha-256
host    all  all          all        reject
${hbaReplication(host.privateNetwork)}
`;

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
    unix_socket_directories: host.socketDir,
    // The socket grants superuser without a password (local trust), so only
    // the run-as user (and root) may open it.
    unix_socket_permissions: "0700",
    ssl: "on",
    ssl_cert_file: "server.crt",
    ssl_key_file: "server.key",
    ssl_min_protocol_version: "TLSv1.2",
    password_encryption: "scram-sha-256",
    // Hundreds of small instances: never try to reserve huge pages.
    huge_pages: "off",
    ...tierSettings(o.tier, os.totalmem()),
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
  return `# Managed by the dbaas agent; rewritten on every start. Do not edit.\n# tier: ${o.tier}\n${publishedPortLine(id, o.port)}\n${lines.join("\n")}\ninclude = ${confValue(ARCHIVE_CONF)}\n`;
}

export const configPath = (dir: string) => path.join(dir, "dbaas.conf");

/** The private port the instance's `dbaas.conf` last gave its server, if any (choosePrivatePort prefers it). */
export async function lastPrivatePort(dir: string): Promise<number | undefined> {
  const m = /^port = '(\d+)'$/m.exec(await readFile(configPath(dir), "utf8").catch(() => ""));
  return m ? Number(m[1]) : undefined;
}

/**
 * The instance's WAL spool: owned by the run-as user (basic_archive writes
 * there), inside an agent-owned root. Created here, never reset: the archiver
 * closes it (mode 0500) while it is over its bound, and reopens it.
 */
async function ensureSpool(host: Host, spool: string): Promise<void> {
  try {
    await mkdir(spool, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return;
    throw e;
  }
  if (host.runAs.switchUser) await chown(spool, host.runAs.uid, host.runAs.gid);
}

/** Settings, the include line and the locked pg_hba.conf, ready for a start. */
export async function writeStartConfig(host: Host, dir: string, conf: string): Promise<void> {
  const spool = host.spoolDir(path.basename(dir));
  await ensureSpool(host, spool);
  await writeOwned(host.runAs, path.join(dir, ARCHIVE_CONF), `basic_archive.archive_directory = ${confValue(spool)}\n`);
  await writeOwned(host.runAs, configPath(dir), conf);
  const pgConf = path.join(dir, "postgresql.conf");
  const pgConfText = await readFile(pgConf, "utf8");
  if (!INCLUDE_RE.test(pgConfText)) await writeOwned(host.runAs, pgConf, `${pgConfText}\n${INCLUDE_LINE}\n`);
  await writeOwned(host.runAs, path.join(dir, "pg_hba.conf"), HBA_LOCKED);
}

/** pg_hba.conf that lets customers in (TLS + SCRAM only); takes effect on the next reload. */
export async function writeOpenHba(host: Host, dir: string): Promise<void> {
  await writeOwned(host.runAs, path.join(dir, "pg_hba.conf"), openHba(host));
}
