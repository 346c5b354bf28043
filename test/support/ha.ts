/**
 * What the high availability end-to-end test and bench share: a client that writes without pause through the
 * database's unchanged host name (resolved on the real DNS server at every connect, verify-full against the CA
 * bundle the API gave), remembering which writes were acknowledged and when writing stopped and resumed; a lost
 * host, simulated (the agent's restart held, the agent and the primary's postmaster killed with SIGKILL); and the
 * high availability record through the API.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { holdFilePath } from "../../deploy/local/supervisor.ts";
import { localStackLayout } from "../../services/kit/src/local-stack.ts";
import type { Api } from "./backups.ts";
import { poll } from "./backups.ts";
import { type Named, startNamed } from "./named.ts";
import { createTestDatabase, type TestDatabase } from "./pg.ts";
import { type Stack, startStack } from "./stack.ts";

export interface HaMember {
  id: string;
  role: "primary" | "standby";
  status: string;
  region: string;
  lag_bytes: number;
}

export interface HaRecord {
  standbys: number;
  synchronous: boolean;
  members: HaMember[];
  last_failover: { at: string; reason: string; from: string; to: string } | null;
}

export async function haOf(api: Api, id: string): Promise<HaRecord> {
  const res = await api.get(`/v1/databases/${id}/high-availability`);
  if (res.status !== 200) throw new Error(`GET high-availability: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as HaRecord;
}

/** Polls until the primary and `standbys` standbys all run; answers the record. */
export async function waitMembersRunning(api: Api, id: string, standbys: number, timeoutMs = 300_000): Promise<HaRecord> {
  return await poll(
    async () => {
      const ha = await haOf(api, id);
      const running = ha.members.filter((m) => m.status === "running");
      return ha.members.length === standbys + 1 && running.length === standbys + 1 && ha;
    },
    timeoutMs,
    `${id}: primary and ${standbys} standby(s) running`,
  );
}

/** One write and when it was acknowledged (or failed). */
export interface WriteOutcome {
  id: number;
  at: number;
  ok: boolean;
  address?: string;
  /** The WAL position the statement answered (its `lsn` column), when it answers one. */
  lsn?: bigint;
}

/** `X/Y` (pg_lsn's text) as bytes from 0/0. */
export function lsnBytes(lsn: string): bigint {
  const [hi, lo] = lsn.split("/");
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`);
}

export interface Writer {
  /** Ids whose INSERT's commit was acknowledged. */
  acknowledged(): number[];
  /** Every outcome, in order. */
  outcomes(): WriteOutcome[];
  /** The first acknowledged write at or after `t` (ms, Date.now()), through an address other than `not` when given. */
  firstAckAfter(t: number, not?: string): WriteOutcome | undefined;
  /** The longest stretch without an acknowledged write, between `from` and `to` (ms). */
  longestGap(from: number, to: number): number;
  stop(): Promise<void>;
}

/**
 * Inserts 1, 2, 3, … into `table` one at a time through the database's host name as the DNS server answers it at
 * each (re)connect (or always to `address`: a client that holds on to one server), over TLS verified against `ca`
 * for that name. A failed write or connection is retried on a new connection (re-resolving the name) after
 * `pauseMs`. `statement` replaces the INSERT (`$1` the id); an `lsn` column it answers is recorded.
 */
export function startWriter(o: {
  named: Named;
  host: string;
  port: number;
  password: string;
  ca: string;
  table: string;
  pauseMs?: number;
  address?: string;
  statement?: string;
}): Writer {
  const outcomes: WriteOutcome[] = [];
  let stopping = false;
  let next = 1;
  const loop = (async () => {
    while (!stopping) {
      let client: pg.Client | undefined;
      let address: string | undefined;
      try {
        [address] = o.address ? [o.address] : await o.named.dig(o.host);
        if (!address) throw new Error(`${o.host} resolves nowhere`);
        client = new pg.Client({
          host: address,
          port: o.port,
          user: "dbadmin",
          password: o.password,
          database: "defaultdb",
          ssl: { ca: o.ca, servername: o.host },
          connectionTimeoutMillis: 3000,
          query_timeout: 10_000,
        });
        client.on("error", () => {});
        await client.connect();
        while (!stopping) {
          const id = next++;
          try {
            const res = await client.query(o.statement ?? `INSERT INTO ${o.table} (id) VALUES ($1)`, [id]);
            const lsn = res.rows[0]?.lsn as string | undefined;
            outcomes.push({ id, at: Date.now(), ok: true, address, ...(lsn ? { lsn: lsnBytes(lsn) } : {}) });
          } catch (err) {
            outcomes.push({ id, at: Date.now(), ok: false, address });
            throw err;
          }
        }
      } catch {
        await new Promise((r) => setTimeout(r, o.pauseMs ?? 100));
      } finally {
        await client?.end().catch(() => {});
      }
    }
  })();
  return {
    acknowledged: () => outcomes.filter((w) => w.ok).map((w) => w.id),
    outcomes: () => [...outcomes],
    firstAckAfter: (t, not) => outcomes.find((w) => w.ok && w.at >= t && (not === undefined || w.address !== not)),
    longestGap(from, to) {
      const acks = [from, ...outcomes.filter((w) => w.ok && w.at >= from && w.at <= to).map((w) => w.at), to];
      let gap = 0;
      for (let i = 1; i < acks.length; i++) gap = Math.max(gap, acks[i]! - acks[i - 1]!);
      return gap;
    },
    async stop() {
      stopping = true;
      await loop;
    },
  };
}

/** The pid in an instance's postmaster.pid on `agent`, or undefined when it has none. */
export async function postmasterPidOn(stack: Stack, agent: string, id: string): Promise<number | undefined> {
  const text = await readFile(join(stack.dataDir, "agents", agent, "instances", id, "postmaster.pid"), "utf8").catch(() => "");
  const pid = Number(text.split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * A host lost: its agent's restart held (run/hold/<agent>), then the agent and the primary's postmaster killed
 * with SIGKILL (the agent first, so it cannot start the server again). Answers when (Date.now()).
 */
export async function loseHost(stack: Stack, agent: string, primaryId: string): Promise<number> {
  const hold = holdFilePath(stack.dataDir, agent);
  await mkdir(join(hold, ".."), { recursive: true });
  await writeFile(hold, "a lost host, simulated by test/support/ha.ts\n");
  const agentPid = await stack.pid(agent);
  const postmaster = await postmasterPidOn(stack, agent, primaryId);
  const at = Date.now();
  process.kill(agentPid, "SIGKILL");
  if (postmaster) process.kill(postmaster, "SIGKILL");
  return at;
}

/** The lost host comes back: its agent is started again by the stack's supervisor. */
export async function bringBackHost(stack: Stack, agent: string): Promise<void> {
  await rm(holdFilePath(stack.dataDir, agent), { force: true });
}

/** Where each simulated host of `LOCAL_AGENTS="fsn1;fsn1;fsn1"` publishes (deploy/local: the n-th on 127.0.0.(n+1)). */
export const HOST_ADDRESS: Record<string, string> = { "agent-fsn1": "127.0.0.2", "agent-fsn1-2": "127.0.0.3", "agent-fsn1-3": "127.0.0.4" };

/** The agent that publishes on `address`. */
export const agentAt = (address: string) => Object.entries(HOST_ADDRESS).find(([, a]) => a === address)?.[0];

/** The three-host stack the high availability e2e tests share, with its BIND and metadata database. */
export interface HaStack {
  named: Named;
  meta: TestDatabase;
  stack: Stack;
  stop(): Promise<void>;
}

/** The DNS zone of the high availability e2e stacks. */
export const HA_ZONE = "db.test";

/**
 * A real BIND, a metadata database and the local stack with three agents for fsn1 (three simulated hosts,
 * 127.0.0.2-4, DNS by RFC 2136 updates); seeds that complete in seconds. `env` adds to the stack's settings.
 */
export async function startHaStack(metaName: string, env: Record<string, string> = {}): Promise<HaStack> {
  const named = await startNamed(HA_ZONE);
  const meta = await createTestDatabase(metaName);
  const stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1;fsn1;fsn1",
    // Three agents build their templates one after the other before the stack is ready: minutes under load.
    readyTimeoutMs: 600_000,
    env: {
      DATABASE_DOMAIN: HA_ZONE,
      DNS_PROVIDER: "rfc2136",
      DNS_SERVER: named.server,
      DNS_ZONE: HA_ZONE,
      DNS_TSIG_KEY: named.tsigKey,
      DNS_RECONCILE_INTERVAL_MS: "2000",
      // Seeds complete in seconds: the backup schedule looks every second, WAL is archived every 5 s.
      BACKUP_SCHEDULE_INTERVAL_MS: "1000",
      BACKUP_ARCHIVE_TIMEOUT_S: "5",
      ...env,
    },
  });
  return {
    named,
    meta,
    stack,
    async stop() {
      for (const service of [...Object.keys(HOST_ADDRESS), "databases"]) await rm(holdFilePath(stack.dataDir, service), { force: true });
      await stack.destroy();
      await meta.drop();
      await named.stop();
    },
  };
}

export interface HaDatabase {
  id: string;
  host: string;
  port: number;
  password: string;
  /** The region's CA bundle (verify-full on whichever host the database runs). */
  ca: string;
}

/** A new database with `standbys` standbys, once its primary and standbys all run; `onCreated` hears its id at once. */
export async function createHaDatabase(
  api: Api,
  name: string,
  standbys: number,
  synchronous: boolean,
  onCreated: (id: string) => void = () => {},
): Promise<HaDatabase> {
  const res = await api.post("/v1/databases", { name, region: "fsn1", tier: "micro", standbys, synchronous });
  if (res.status !== 201) throw new Error(`create ${name}: ${res.status} ${JSON.stringify(res.body)}`);
  const db = res.body.data as HaDatabase;
  onCreated(db.id);
  await waitMembersRunning(api, db.id, standbys);
  const ca = (await api.get(`/v1/databases/${db.id}/ca-certificate`)).body as string;
  return { id: db.id, host: db.host, port: db.port, password: db.password, ca };
}

/** `text` as the customer on `address` (one of the database's hosts), verify-full against its name. */
/** Where the database's name points now (its A record on `named`), and the agent there. */
export async function primaryHost(named: Named, db: { host: string }): Promise<{ address: string; agent: string }> {
  const [address] = await named.dig(db.host);
  const agent = address ? agentAt(address) : undefined;
  if (!address || !agent) throw new Error(`${db.host} resolves to ${address ?? "nothing"}`);
  return { address, agent };
}

export async function sqlOn(db: HaDatabase, address: string, text: string, params: unknown[] = []): Promise<Record<string, any>[]> {
  const c = new pg.Client({
    host: address,
    port: db.port,
    user: "dbadmin",
    password: db.password,
    database: "defaultdb",
    ssl: { ca: db.ca, servername: db.host },
    connectionTimeoutMillis: 5000,
  });
  c.on("error", () => {});
  await c.connect();
  try {
    return (await c.query(text, params)).rows;
  } finally {
    await c.end().catch(() => {});
  }
}

/** The database's operations of type failover, newest first. */
export async function failoverOperations(api: Api, id: string): Promise<Array<Record<string, string>>> {
  const res = await api.get(`/v1/databases/${id}/operations?per_page=100`);
  if (res.status !== 200) throw new Error(`operations: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body.data.operations as Array<Record<string, string>>).filter((o) => o.type === "failover");
}

/** The agent whose instances directory holds `id` now, among the simulated hosts. */
export function agentHolding(stack: Stack, id: string): string | undefined {
  return Object.keys(HOST_ADDRESS).find((agent) => existsSync(join(stack.dataDir, "agents", agent, "instances", id)));
}

/** The walreceiver of the standby `standbyId` on `agent` (a child of its postmaster). */
export async function walReceiverPid(stack: Stack, agent: string, standbyId: string): Promise<number> {
  const postmaster = await postmasterPidOn(stack, agent, standbyId);
  if (!postmaster) throw new Error(`${standbyId} has no postmaster on ${agent}`);
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    // pid (comm) state ppid …: comm may hold spaces, so the fields after its closing parenthesis.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid !== postmaster) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes("walreceiver")) return Number(pid);
  }
  throw new Error(`${standbyId} on ${agent} has no walreceiver`);
}

/**
 * A service of the stack down until released: its restart held (run/hold/<service>), the process killed with
 * SIGKILL. Answers when (Date.now()).
 */
export async function holdDown(stack: Stack, service: string): Promise<number> {
  const hold = holdFilePath(stack.dataDir, service);
  await mkdir(join(hold, ".."), { recursive: true });
  await writeFile(hold, "held down by test/support/ha.ts\n");
  const pid = await stack.pid(service);
  const at = Date.now();
  process.kill(pid, "SIGKILL");
  return at;
}

/** The nftables table a partition adds (its own: the agents' meters keep theirs). */
const PARTITION_TABLE = "dbaas_e2e_partition";

async function nft(script: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn("nft", ["-f", "-"], { stdio: ["pipe", "ignore", "pipe"] });
    let err = "";
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`nft: ${err.trim()}`))));
    child.stdin!.end(script);
  });
}

/** Whether this process may add nftables rules (root with nft installed); why not otherwise. */
export async function partitionUnavailable(): Promise<string | undefined> {
  try {
    await nft(`add table ip ${PARTITION_TABLE}_probe\ndelete table ip ${PARTITION_TABLE}_probe\n`);
    return undefined;
  } catch (err) {
    return `nftables unavailable: ${(err as Error).message}`;
  }
}

/**
 * The host of `agent` cut from the control plane, its servers left alone: its agent's calls to the databases
 * service come from its own address (AGENT_CONTROL_SOURCE_ADDRESS, set by the local stack), so a rule dropping
 * loopback packets between that address and the databases service's port, and those to and from the agent's own
 * port (where the databases service calls it), cuts it both ways, established connections included, while its
 * PostgreSQL servers keep serving clients and streaming to their standbys. Answers when (Date.now()) and how to heal.
 */
export async function partitionFromControlPlane(stack: Stack, agent: string): Promise<{ at: number; heal: () => Promise<void> }> {
  const layout = localStackLayout({ ...stack.env });
  const address = HOST_ADDRESS[agent];
  const agentPort = layout.agents.find((a) => a.id === agent)?.port;
  if (!address || !agentPort) throw new Error(`no simulated host ${agent}`);
  await nft(
    [
      `table ip ${PARTITION_TABLE} {`,
      "  chain out {",
      "    type filter hook output priority -50; policy accept;",
      `    ip saddr ${address} tcp dport ${layout.databases} drop`,
      `    ip daddr ${address} tcp sport ${layout.databases} drop`,
      `    tcp dport ${agentPort} drop`,
      `    tcp sport ${agentPort} drop`,
      "  }",
      "}",
      "",
    ].join("\n"),
  );
  return { at: Date.now(), heal: healPartition };
}

/** Every partition healed (idempotent). */
export async function healPartition(): Promise<void> {
  await nft(`table ip ${PARTITION_TABLE} {}\ndelete table ip ${PARTITION_TABLE}\n`);
}

/** The nftables table a replication stall adds. */
const STALL_TABLE = "dbaas_e2e_stall";

/**
 * The replication link of the standby `standbyId` on `agent` stalled, as a congested or broken network would:
 * the packets its primary sends on its walreceiver's connection are dropped (by that connection's local address
 * and port, so clients of the primary are not touched). The primary goes on committing (asynchronous mode), the
 * standby receives nothing more, and what was in flight never arrives — unlike a stopped walreceiver, whose
 * socket buffers would deliver it later. Answers how to end it.
 */
export async function stallReplication(stack: Stack, agent: string, standbyId: string): Promise<() => Promise<void>> {
  const pid = await walReceiverPid(stack, agent, standbyId);
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn("ss", ["-tnpH"], { stdio: ["ignore", "pipe", "ignore"] });
    let text = "";
    child.stdout!.on("data", (d: Buffer) => (text += d.toString()));
    child.on("error", reject);
    child.on("exit", () => resolve(text));
  });
  const line = out.split("\n").find((l) => l.includes(`pid=${pid},`));
  const m = line?.match(/^\S+\s+\d+\s+\d+\s+([\d.]+):(\d+)\s+([\d.]+):(\d+)/);
  if (!m) throw new Error(`the walreceiver (pid ${pid}) of ${standbyId} has no TCP connection:\n${out}`);
  const [, local, localPort] = m;
  await nft(
    [
      `table ip ${STALL_TABLE} {`,
      "  chain out {",
      "    type filter hook output priority -50; policy accept;",
      // By the walreceiver's end alone: the primary's end may be a published port translated to its private one.
      `    ip daddr ${local} tcp dport ${localPort} drop`,
      "  }",
      "}",
      "",
    ].join("\n"),
  );
  return endStall;
}

/** Every replication stall ended (idempotent). */
export async function endStall(): Promise<void> {
  await nft(`table ip ${STALL_TABLE} {}\ndelete table ip ${STALL_TABLE}\n`);
}
