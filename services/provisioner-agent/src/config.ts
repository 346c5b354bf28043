import { hostname } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigError, envInt, envList, envString, requireEnv } from "@dbaas/kit";
import { DEFAULT_PRIVATE_ADDRESS, privateAddressing } from "./instances/private-network.ts";
import type { ConnectionMeterMode } from "./proxy/meter.ts";

export interface Config {
  agentId: string;
  regions: string[];
  capacity: number;
  portRangeStart: number;
  portRangeEnd: number;
  /** Port of the agent's own Connect server (status for operators). */
  port: number;
  dataDir: string;
  databasesUrl: string;
  internalSecret: string;
  /**
   * AGENT_REPLICATION_SECRET: the same for every agent of a region. A
   * primary's replication password is derived from it and the primary's id,
   * so a replica's agent knows it without it being stored or sent.
   */
  replicationSecret: string;
  /** Unprivileged OS user PostgreSQL runs as when the agent runs as root. */
  runAsUser: string;
  /** Address instances listen on for clients. */
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
  /** Period of full reports (heartbeat) and of re-observing every instance. */
  reportIntervalMs: number;
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
  /** The environment an S3 store reads: BACKUP_S3_ENDPOINT, BACKUP_S3_IDLE_TIMEOUT_MS and the AWS_* credentials and region. */
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

function privateConfig(env: Record<string, string | undefined>): { privateAddress: string; privateNetwork: string } {
  try {
    const p = privateAddressing(envString(env, "AGENT_PRIVATE_ADDRESS", DEFAULT_PRIVATE_ADDRESS), env.AGENT_PRIVATE_NETWORK);
    return { privateAddress: p.address, privateNetwork: p.network };
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}

export function readConfig(env: Record<string, string | undefined> = process.env): Config {
  const agentId = envString(
    env,
    "AGENT_ID",
    `agent-${hostname()
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, "-")}`,
  );
  const [portRangeStart, portRangeEnd] = parseRange(envString(env, "AGENT_PORT_RANGE", "15400-15599"));
  return {
    agentId,
    regions: envList(env, "AGENT_REGIONS", ["fsn1"]),
    capacity: envInt(env, "AGENT_CAPACITY", portRangeEnd - portRangeStart + 1),
    portRangeStart,
    portRangeEnd,
    port: envInt(env, "PORT", 8090),
    dataDir: resolve(envString(env, "AGENT_DATA_DIR", `.dbaas/agents/${agentId}`)),
    databasesUrl: requireEnv(env, "DATABASES_URL"),
    internalSecret: requireEnv(env, "INTERNAL_AUTH_SECRET"),
    replicationSecret: requireEnv(env, "AGENT_REPLICATION_SECRET"),
    runAsUser: envString(env, "AGENT_RUN_AS_USER", "nobody"),
    listenAddress: envString(env, "AGENT_LISTEN_ADDRESS", "127.0.0.1"),
    ...privateConfig(env),
    connectionMeter: meterMode(envString(env, "CONNECTION_METER", "auto")),
    nftPath: envString(env, "NFT_PATH", "nft"),
    reportIntervalMs: envInt(env, "AGENT_REPORT_INTERVAL_MS", 3000),
    concurrency: envInt(env, "AGENT_CONCURRENCY", 4),
    sampleIntervalMs: positive(env, "AGENT_SAMPLE_INTERVAL_MS", 30_000),
    backupStoreUrl: envString(env, "BACKUP_STORE_URL", pathToFileURL(resolve(envString(env, "DBAAS_DATA_DIR", ".dbaas"), "backups")).href),
    backupStoreEnv: Object.fromEntries(STORE_ENV.map((k) => [k, env[k]])),
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
