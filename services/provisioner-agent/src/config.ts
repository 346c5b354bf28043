import { existsSync } from "node:fs";
import net from "node:net";
import { hostname } from "node:os";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ConfigError, envInt, envList, envString, requireEnv, requireSecret } from "@dbaas/kit";
import { backupKeyring, s3ServerSideEncryption } from "./backups/open-store.ts";
import { DEFAULT_PRIVATE_ADDRESS, privateAddressing } from "./instances/private-network.ts";
import { parseUidRange } from "./instances/tenant-users.ts";
import type { ConnectionMeterMode } from "./proxy/meter.ts";

export interface Config {
  agentId: string;
  regions: string[];
  capacity: number;
  portRangeStart: number;
  portRangeEnd: number;
  /** Port of the agent's own Connect server (status for operators, InstanceAdminService for the databases service). */
  port: number;
  /**
   * AGENT_CONTROL_URL (`http://127.0.0.1:<PORT>`): where the databases service
   * reaches this agent's Connect server, registered with it. Set it wherever
   * the two do not share a loopback (compose: `http://agent:8090`).
   */
  controlUrl: string;
  dataDir: string;
  databasesUrl: string;
  /**
   * AGENT_CONTROL_SOURCE_ADDRESS (unset: the kernel's choice): the local address its connections to the
   * databases service are made from. The local stack sets each simulated host's own (127.0.0.N), so a test can
   * cut one host from the control plane with a firewall rule on that address.
   */
  controlSourceAddress: string | undefined;
  internalSecret: string;
  /**
   * AGENT_REPLICATION_SECRET: the same for every agent of a region. A
   * primary's replication password is derived from it and the primary's id,
   * so a replica's agent knows it without it being stored or sent.
   */
  replicationSecret: string;
  /** Unprivileged OS user that builds the templates (initdb) when the agent runs as root. */
  runAsUser: string;
  /** AGENT_TENANT_UID_RANGE (200000-299999): each server's own uid/gid comes from it. */
  tenantUidRange: [number, number];
  /** AGENT_ALLOW_SHARED_UID=1: start with NODE_ENV=production even when every server must run as the agent. */
  allowSharedUid: boolean;
  /** NODE_ENV=production. */
  production: boolean;
  /**
   * AGENT_PUBLIC_ADDRESS (127.0.0.1): where clients reach this agent's
   * databases, IPv4 and/or IPv6 literals separated by commas. Registered with
   * the databases service, which points every host name of a database placed
   * here at it (DNS_PROVIDER=rfc2136).
   */
  publicAddresses: string[];
  /**
   * AGENT_LISTEN_ADDRESS: where the published ports are bound (PostgreSQL-style,
   * `*` for every address); default the public addresses. Set apart only
   * behind NAT (a pod binds `0.0.0.0`, its node's address is the public one).
   */
  listenAddress: string;
  /**
   * AGENT_PRIVATE_ADDRESS (127.0.0.1): what the servers listen on behind the
   * meter, and where replicas on other agents stream from (a pod's IP);
   * AGENT_PRIVATE_NETWORK: the CIDR a primary lets replicas stream from
   * (default: the address alone, if loopback; required otherwise).
   */
  privateAddress: string;
  privateNetwork: string;
  /** CONNECTION_METER (auto): who forwards and counts the published ports' traffic, nftables or the agent's proxy (proxy/meter.ts). */
  connectionMeter: ConnectionMeterMode;
  /** NFT_PATH (nft, looked up in PATH): the nft binary; one with the file capability cap_net_admin when the agent is not root. */
  nftPath: string;
  /** AGENT_CGROUP_ROOT (/sys/fs/cgroup): where the cgroup hierarchies are mounted; each server gets a cgroup with its tier's limits (instances/cgroups.ts). */
  cgroupRoot: string;
  /** Period of full reports (heartbeat) and of re-observing every instance. */
  reportIntervalMs: number;
  /** AGENT_LIVENESS_INTERVAL_MS (500): how often the servers reported running are checked for having exited (a pid check each). */
  livenessIntervalMs: number;
  /** AGENT_TRUST_REPAIR_INTERVAL_MS (5 s): how often the trusted sources are put back in the meter, whatever changed them. */
  trustRepairIntervalMs: number;
  /**
   * Connection poolers (pooler/): PGBOUNCER_PATH (Debian's /usr/sbin/pgbouncer, else `pgbouncer` in PATH) and
   * AGENT_POOLER_PORT_OFFSET (the port range's size): a database's pooler is published on its port plus this.
   */
  pgbouncerPath: string;
  poolerPortOffset: number;
  /** AGENT_LEASE_RENEW_MS (2 s): how often the leases on highly available primaries are renewed (leases.ts). */
  leaseRenewMs: number;
  /** AGENT_LEASE_FENCE_MARGIN_MS (3 s): a primary is fenced this long before its lease would end unrenewed. */
  leaseFenceMarginMs: number;
  /**
   * The fencing watchdog (instances/watchdog.ts), which stops a highly available primary's postmaster when its lease
   * ends while the agent is dead: AGENT_WATCHDOG (`on`; `off`), AGENT_WATCHDOG_MARGIN_MS (1 s: how long before the
   * lease's end; less than the agent's own fence margin, so a live agent fences first), AGENT_WATCHDOG_ENTRY (its
   * entry point: `instances/watchdog-main.ts`, run with the agent's Node flags; the local stack gives its bundle).
   */
  watchdog: { enabled: boolean; marginMs: number; entry: string; nodeArgs: string[] };
  /** How many instances are worked on at once. */
  concurrency: number;
  /** AGENT_SAMPLE_INTERVAL_MS (30 s): how often every running instance is measured and the samples reported. */
  sampleIntervalMs: number;
  /**
   * Where backups and archived WAL go: `file:///abs/dir` or `s3://bucket/prefix`
   * (BACKUP_STORE_URL; default `file://<DBAAS_DATA_DIR or ./.dbaas>/backups`, the
   * local stack's shared store). Shared by every agent of a region, so a restore
   * can run on any of them.
   */
  backupStoreUrl: string;
  /**
   * The environment the store reads (backups/open-store.ts): BACKUP_ENCRYPTION_KEY
   * (required: 32 bytes, base64; every object is encrypted under a data key of
   * its database wrapped by it) and BACKUP_ENCRYPTION_KEY_PREVIOUS (the keys
   * being rotated away from, comma-separated); for S3 BACKUP_S3_ENDPOINT,
   * BACKUP_S3_IDLE_TIMEOUT_MS, BACKUP_S3_SSE (AES256) and the AWS_* credentials and region.
   */
  backupStoreEnv: Record<string, string | undefined>;
  backup: {
    /** BACKUP_SPOOL_MAX_BYTES (1 GiB): WAL waiting for upload per database before archiving pauses. */
    maxSpoolBytes: number;
    /** BACKUP_RETENTION_DAYS (7): the restore window. */
    retentionDays: number;
    /** BACKUP_PRUNE_INTERVAL_MS (1 h): how often retention runs. */
    pruneIntervalMs: number;
    /** BACKUP_CONCURRENCY (1): base backups at once on this agent. */
    concurrency: number;
    /**
     * BACKUP_ARCHIVE_TIMEOUT_S (30): the servers' archive_timeout, how far the
     * latest restorable instant trails a busy database (tests lower it).
     */
    archiveTimeoutS: number;
    /**
     * BACKUP_UPLOAD_RETRY_MAX_MS (30 s): the longest wait between WAL upload
     * attempts while the store fails (1 s, 2 s, 4 s… up to it; tests lower it).
     */
    uploadRetryMaxMs: number;
  };
}

const STORE_ENV = [
  "BACKUP_ENCRYPTION_KEY",
  "BACKUP_ENCRYPTION_KEY_PREVIOUS",
  "BACKUP_S3_SSE",
  "BACKUP_S3_ENDPOINT",
  "BACKUP_S3_IDLE_TIMEOUT_MS",
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_REGION",
] as const;

/** The spool closes while it still has room for one 16 MiB segment, so it must hold at least two. */
function spoolBound(env: Record<string, string | undefined>): number {
  const n = envInt(env, "BACKUP_SPOOL_MAX_BYTES", 1024 ** 3);
  if (n < 32 * 1024 ** 2) throw new ConfigError(`BACKUP_SPOOL_MAX_BYTES must be at least 33554432 (two WAL segments), got ${n}`);
  return n;
}

function positive(env: Record<string, string | undefined>, name: string, fallback: number): number {
  const n = envInt(env, name, fallback);
  if (n <= 0) throw new ConfigError(`${name} must be positive, got ${n}`);
  return n;
}

function meterMode(raw: string): ConnectionMeterMode {
  if (raw === "nftables" || raw === "proxy" || raw === "auto") return raw;
  throw new ConfigError(`CONNECTION_METER must be nftables, proxy or auto, got "${raw}"`);
}

function parseRange(raw: string): [number, number] {
  const m = /^(\d+)-(\d+)$/.exec(raw);
  if (!m) throw new ConfigError(`AGENT_PORT_RANGE must look like 15400-15599, got "${raw}"`);
  return [Number(m[1]), Number(m[2])];
}

/** AGENT_PUBLIC_ADDRESS: one or more IP literals (a name would leave the DNS record nothing to point at). */
function publicAddresses(env: Record<string, string | undefined>): string[] {
  const list = envList(env, "AGENT_PUBLIC_ADDRESS", ["127.0.0.1"]);
  for (const a of list) {
    if (net.isIP(a) === 0) throw new ConfigError(`AGENT_PUBLIC_ADDRESS must list IPv4 or IPv6 addresses, got "${a}"`);
  }
  return list;
}

function privateConfig(env: Record<string, string | undefined>): { privateAddress: string; privateNetwork: string } {
  try {
    const p = privateAddressing(envString(env, "AGENT_PRIVATE_ADDRESS", DEFAULT_PRIVATE_ADDRESS), env.AGENT_PRIVATE_NETWORK);
    return { privateAddress: p.address, privateNetwork: p.network };
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}

/** BACKUP_STORE_URL, by default the local stack's shared store `file://<DBAAS_DATA_DIR or ./.dbaas>/backups`. */
export function backupStoreUrl(env: Record<string, string | undefined>): string {
  return envString(env, "BACKUP_STORE_URL", pathToFileURL(resolve(envString(env, "DBAAS_DATA_DIR", ".dbaas"), "backups")).href);
}

/** The store's settings, checked: a missing or malformed key fails the start, not the first backup. */
export function backupStoreEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  requireSecret(env, "BACKUP_ENCRYPTION_KEY");
  backupKeyring(env);
  s3ServerSideEncryption(env);
  return Object.fromEntries(STORE_ENV.map((k) => [k, env[k]]));
}

/** AGENT_POOLER_PORT_OFFSET: the poolers' ports (the instances' shifted by it) must not overlap the instances'. */
function poolerOffset(env: Record<string, string | undefined>, start: number, end: number): number {
  const offset = envInt(env, "AGENT_POOLER_PORT_OFFSET", end - start + 1);
  if (offset !== 0 && (offset < end - start + 1 || end + offset > 65535)) {
    throw new ConfigError(
      `AGENT_POOLER_PORT_OFFSET=${offset} must be 0 (no poolers) or at least the port range's size (${end - start + 1}) with ${end} + it ≤ 65535`,
    );
  }
  return offset;
}

function watchdogConfig(env: Record<string, string | undefined>, fenceMarginMs: number): Config["watchdog"] {
  const mode = envString(env, "AGENT_WATCHDOG", "on");
  if (mode !== "on" && mode !== "off") throw new ConfigError(`AGENT_WATCHDOG must be on or off, got "${mode}"`);
  const marginMs = envInt(env, "AGENT_WATCHDOG_MARGIN_MS", 1000);
  if (marginMs < 0 || marginMs >= fenceMarginMs) {
    throw new ConfigError(
      `AGENT_WATCHDOG_MARGIN_MS must be at least 0 and less than AGENT_LEASE_FENCE_MARGIN_MS (${fenceMarginMs}), got ${marginMs}`,
    );
  }
  const entry = resolve(envString(env, "AGENT_WATCHDOG_ENTRY", fileURLToPath(new URL("./instances/watchdog-main.ts", import.meta.url))));
  // TypeScript needs tsx's loader: the agent's own flags carry it when tsx runs the agent.
  const tsx = entry.endsWith(".ts") && !process.execArgv.some((a) => a.includes("tsx"));
  return { enabled: mode === "on", marginMs, entry, nodeArgs: [...process.execArgv, ...(tsx ? ["--import", "tsx"] : [])] };
}

export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  const agentId = envString(
    env,
    "AGENT_ID",
    `agent-${hostname()
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, "-")}`,
  );
  const published = publicAddresses(env);
  const [portRangeStart, portRangeEnd] = parseRange(envString(env, "AGENT_PORT_RANGE", "15400-15599"));
  return {
    agentId,
    regions: envList(env, "AGENT_REGIONS", ["fsn1"]),
    capacity: envInt(env, "AGENT_CAPACITY", portRangeEnd - portRangeStart + 1),
    portRangeStart,
    portRangeEnd,
    port: envInt(env, "PORT", 8090),
    controlUrl: envString(env, "AGENT_CONTROL_URL", `http://127.0.0.1:${envInt(env, "PORT", 8090)}`),
    dataDir: resolve(envString(env, "AGENT_DATA_DIR", `.dbaas/agents/${agentId}`)),
    databasesUrl: requireEnv(env, "DATABASES_URL"),
    controlSourceAddress: env.AGENT_CONTROL_SOURCE_ADDRESS || undefined,
    internalSecret: requireSecret(env, "INTERNAL_AUTH_SECRET"),
    replicationSecret: requireSecret(env, "AGENT_REPLICATION_SECRET"),
    runAsUser: envString(env, "AGENT_RUN_AS_USER", "nobody"),
    tenantUidRange: parseUidRange(envString(env, "AGENT_TENANT_UID_RANGE", "200000-299999")),
    allowSharedUid: env.AGENT_ALLOW_SHARED_UID === "1",
    production: env.NODE_ENV === "production",
    publicAddresses: published,
    listenAddress: envString(env, "AGENT_LISTEN_ADDRESS", published.join(",")),
    ...privateConfig(env),
    connectionMeter: meterMode(envString(env, "CONNECTION_METER", "auto")),
    nftPath: envString(env, "NFT_PATH", "nft"),
    cgroupRoot: envString(env, "AGENT_CGROUP_ROOT", "/sys/fs/cgroup"),
    reportIntervalMs: envInt(env, "AGENT_REPORT_INTERVAL_MS", 3000),
    livenessIntervalMs: envInt(env, "AGENT_LIVENESS_INTERVAL_MS", 500),
    trustRepairIntervalMs: positive(env, "AGENT_TRUST_REPAIR_INTERVAL_MS", 5000),
    pgbouncerPath: envString(env, "PGBOUNCER_PATH", existsSync("/usr/sbin/pgbouncer") ? "/usr/sbin/pgbouncer" : "pgbouncer"),
    poolerPortOffset: poolerOffset(env, portRangeStart, portRangeEnd),
    leaseRenewMs: positive(env, "AGENT_LEASE_RENEW_MS", 2000),
    leaseFenceMarginMs: positive(env, "AGENT_LEASE_FENCE_MARGIN_MS", 3000),
    watchdog: watchdogConfig(env, positive(env, "AGENT_LEASE_FENCE_MARGIN_MS", 3000)),
    concurrency: envInt(env, "AGENT_CONCURRENCY", 4),
    sampleIntervalMs: positive(env, "AGENT_SAMPLE_INTERVAL_MS", 30_000),
    backupStoreUrl: backupStoreUrl(env),
    backupStoreEnv: backupStoreEnv(env),
    backup: {
      maxSpoolBytes: spoolBound(env),
      retentionDays: positive(env, "BACKUP_RETENTION_DAYS", 7),
      pruneIntervalMs: positive(env, "BACKUP_PRUNE_INTERVAL_MS", 3_600_000),
      concurrency: positive(env, "BACKUP_CONCURRENCY", 1),
      archiveTimeoutS: positive(env, "BACKUP_ARCHIVE_TIMEOUT_S", 30),
      uploadRetryMaxMs: positive(env, "BACKUP_UPLOAD_RETRY_MAX_MS", 30_000),
    },
  };
}
