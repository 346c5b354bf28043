import type { ChildProcess, StdioOptions } from "node:child_process";
import { lstat, readFile, readlink, stat } from "node:fs/promises";
import path from "node:path";
import pg from "pg";

/**
 * The port through which what sits beside the runtime — backups, samples,
 * the connection meter — reaches an instance. They import this file and
 * runtime.ts, never the runtime's own modules (`instances/`); the check
 * `npm run check:agent-boundary` enforces it. A second runtime implements
 * {@link InstanceAccess} (as part of `InstanceRuntime`) and backups and
 * samples work on it unchanged.
 */

/** Instance ids are database ids; they become path components, so no `.` (leftovers use it as a separator). */
export const INSTANCE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/** The customer's own role in every server: may create databases and roles, is not superuser. */
export const ADMIN_ROLE = "dbadmin";
/** The database every server is created with, for the customer. */
export const DEFAULT_DATABASE = "defaultdb";

/** Where, and as which role, the agent's own sessions reach one running server: never through the meter, never over TCP. */
export interface AgentConnection {
  /** A unix socket directory (the local runtime), or a host the runtime makes reachable to the agent alone. */
  host: string;
  port: number;
  /** The agent's role: a superuser that only the agent can log in as. */
  user: string;
  /** Which server process this is (the local runtime: its postmaster's pid and start time): a restarted server's differs. */
  generation?: string;
}

/** Where, how long: one of {@link InstanceAccess.adminSession}'s sessions. */
export interface AdminSessionOptions {
  /** The database to be in (`postgres` unless given). */
  database?: string;
  /** How long to wait for a session (a free one, or a new one to connect); 10 s. */
  timeoutMs?: number;
}

/** No server of the instance runs here (stopped, starting, gone). */
export class ServerNotRunning extends Error {
  constructor(readonly id: string) {
    super(`the server of ${id} is not running on this host`);
  }
}

/**
 * One short session on `conn` (database `postgres` unless `database` names
 * another). `replication` opens a replication connection (BASE_BACKUP);
 * `applicationName` names it in pg_stat_activity.
 */
export function agentClient(
  conn: AgentConnection,
  opts: { timeoutMs?: number; replication?: boolean; applicationName?: string; database?: string } = {},
): pg.Client {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const client = new pg.Client({
    host: conn.host,
    port: conn.port,
    user: conn.user,
    database: opts.database ?? "postgres",
    ssl: false,
    connectionTimeoutMillis: timeoutMs,
    application_name: opts.applicationName ?? "dbaas-agent",
    // A database made read-only at its tier's storage (storage.ts of the databases service) still takes the agent's changes.
    options: "-c default_transaction_read_only=off",
    ...(opts.replication ? { replication: "database" } : { query_timeout: timeoutMs * 2 }),
  } as pg.ClientConfig);
  // Without a listener a server-side disconnect would crash the agent.
  client.on("error", () => {});
  return client;
}

/**
 * Checks, on a connected {@link agentClient} over a unix socket, that the server that answered runs as the
 * owner of the socket directory the agent named. A server's user owns its socket directory and can put a
 * link to another server's socket in place of its own; connect() follows it and peer authentication
 * admits the agent anywhere, so without this the agent's superuser session (a password reset, say) would
 * land in a neighbour's server. Throws (after closing the client) when it did.
 */
export async function assertAnsweringServer(client: pg.Client, conn: AgentConnection): Promise<void> {
  if (!path.isAbsolute(conn.host)) return;
  const pid = (client as unknown as { processID?: number }).processID;
  let backendUid = Number.NaN;
  let dirUid = Number.NaN;
  try {
    let dir = conn.host;
    // The agent's own link (`<socketDir>/.s.PGSQL.<published>`, in a directory of the agent's) names the server's
    // socket directory; a link anywhere else is not believed.
    const sock = path.join(dir, `.s.PGSQL.${conn.port}`);
    if ((await lstat(sock)).isSymbolicLink() && (await stat(dir)).uid === process.getuid?.())
      dir = path.dirname(path.resolve(dir, await readlink(sock)));
    dirUid = (await stat(dir)).uid;
    backendUid = Number(/^Uid:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, "utf8"))?.[1]);
  } catch {
    // unknown: refused below
  }
  if (backendUid === dirUid) return;
  await client.end().catch(() => {});
  throw new Error(
    `refusing the agent's session through ${conn.host}: the server that answered runs as uid ${backendUid}, ` +
      `the socket directory is uid ${dirUid}'s (a link to another server's socket, planted by the server's user?)`,
  );
}

/** {@link agentClient}, connected (and checked: {@link assertAnsweringServer}), given to `fn`, and closed after. */
export async function withAgentSession<T>(
  conn: AgentConnection,
  fn: (c: pg.Client) => Promise<T>,
  timeoutMs = 5000,
  database?: string,
): Promise<T> {
  const client = agentClient(conn, { timeoutMs, ...(database !== undefined && { database }) });
  await client.connect();
  await assertAnsweringServer(client, conn);
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Files and programs as one instance's server: what its server writes must
 * be its own (PostgreSQL refuses a data directory it does not own), and
 * what the agent hands it must be readable by it alone.
 */
export interface ServerFiles {
  /** The OS user and group the server runs as (the agent's own in the shared-uid fallback). */
  readonly uid: number;
  readonly gid: number;
  /** Writes `file` whole (write, then rename: never half-written), owned by the server, `mode` (0600). */
  writeFile(file: string, content: string, mode?: number): Promise<void>;
  /** Creates the directory `dir` (its parent exists), mode 0700, owned by the server. */
  makeDir(dir: string): Promise<void>;
  /** Reads `file`, a regular file the server owns, without following a link (files.ts readOwned). */
  readFile(file: string): Promise<string>;
  /** Runs `file args` as the server's user, without a shell, in `/`, with a minimal environment. */
  spawn(file: string, args: readonly string[], stdio: StdioOptions): ChildProcess;
}

/** What one running server uses, as the sampler reports it. */
export interface ServerUsage {
  /** Cumulative CPU seconds of the server's processes (those that exited included). */
  cpuSeconds: number;
  /** Their memory (proportional: shared buffers counted once). */
  memoryBytes: number;
  /** The bytes its data takes on disk. */
  storageBytes: number;
}

/** Where one instance's server writes its log (server-log/reader.ts reads it), and how much of it may be kept. */
export interface ServerLog {
  /** The directory of its jsonlog files (log_directory). */
  dir: string;
  /** The server's uid: only files it owns are read. */
  uid: number;
  /** The tier's log quota (catalogue TIER_LOG_QUOTA_MB). */
  quotaBytes: number;
}

/**
 * How backups, samples and the meter reach an instance. Every method takes
 * an instance id; none starts, stops or changes one (that is
 * `InstanceRuntime`'s, in the reconciler's hands).
 */
export interface InstanceAccess {
  /** The agent's own session on `id`'s server as it runs now; undefined when no server of it accepts the agent (stopped, starting). */
  agentConnection(id: string): Promise<AgentConnection | undefined>;
  /**
   * `fn` in one of the agent's superuser sessions on `id`'s running server, kept open between calls
   * (admin-sessions.ts: a few per server, closed when it stops, restarts or is deleted, and after a failure);
   * {@link ServerNotRunning} when no server of `id` runs. Statement logging is off in it.
   */
  adminSession<T>(id: string, fn: (c: pg.Client) => Promise<T>, opts?: AdminSessionOptions): Promise<T>;
  /** Files and programs as `id`'s server (its data, its WAL spool, a base backup's staging directory). */
  serverFiles(id: string): Promise<ServerFiles>;
  /** The directory holding one WAL spool per instance (`<root>/<id>`), which `id`'s server archives into and the agent uploads from. */
  readonly walSpoolRoot: string;
  /** CPU, memory and storage of `id`'s running server; undefined when none runs. */
  usage(id: string): Promise<ServerUsage | undefined>;
  /** `id`'s server log, running or not; undefined when the instance is not on this host. */
  serverLog(id: string): Promise<ServerLog | undefined>;
}
