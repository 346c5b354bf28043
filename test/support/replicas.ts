/**
 * What the read-replica end-to-end tests and bench share: an organization that may poll freely, replicas waited
 * for through the public API, the primary's credentials on a replica's address, and a look at an instance from
 * inside (its replication slots, its postmaster) over the agent's unix socket, as only the agent can.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { createApi } from "./api.ts";
import { type Api, poll } from "./backups.ts";
import { query } from "./pgclient.ts";
import type { Stack } from "./stack.ts";

const run = promisify(execFile);

export interface ReplicaJson {
  id: string;
  name: string;
  database_id: string;
  region: string;
  tier: string;
  status: string;
  status_reason?: string;
  host: string;
  port: number;
  database: string;
  username: string;
  connection_string: string;
  lag_bytes: number;
  created_at: string;
}

/**
 * A fresh organization on the internal plan (the rate limiter never refuses it: several replicas are watched at
 * once) with a card, which a replica needs (it is never part of the free allowance). set-plan runs from the
 * stack's checkout; the plan reaches the gateway with the next token.
 */
export async function account(stack: Stack, prefix: string): Promise<Api> {
  const api = createApi(stack.baseUrl);
  const signedUp = await api.signup(prefix);
  await run(process.execPath, ["--import", "tsx", "services/identity/src/cli/set-plan.ts", signedUp.organization.id, "internal"], {
    cwd: stack.root,
    env: { ...process.env, IDENTITY_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 1}`, DBAAS_DATA_DIR: stack.dataDir },
  });
  const login = await api.post("/v1/auth/token", { email: signedUp.email, password: signedUp.password });
  api.setToken(login.body.data.access_token);
  await api.addPaymentMethod();
  return api;
}

export async function getReplica(api: Api, dbId: string, rid: string): Promise<ReplicaJson | undefined> {
  const res = await api.get(`/v1/databases/${dbId}/replicas/${rid}`);
  return res.status === 200 ? (res.body.data as ReplicaJson) : undefined;
}

/** Polls (about once a second) until the replica has `status`; a replica that failed on the way fails the wait with its reason. */
export async function waitReplica(api: Api, dbId: string, rid: string, status: string, timeoutMs = 120_000): Promise<ReplicaJson> {
  return await poll(
    async () => {
      const r = await getReplica(api, dbId, rid);
      if (r?.status === "failed" && status !== "failed") throw new Error(`${rid} failed: ${r.status_reason}`);
      return r?.status === status && r;
    },
    timeoutMs,
    `${rid} ${status}`,
  );
}

/** A replica's connection string (password masked) with the primary's password in it. */
export function withPassword(connectionString: string, password: string): string {
  const url = new URL(connectionString);
  url.password = encodeURIComponent(password);
  return url.toString();
}

/** Polls `sql` on `cs` until `ok(rows)`; returns the milliseconds it took. Connection errors count as not yet. */
export async function untilRows(cs: string, sql: string, ok: (rows: any[]) => boolean, timeoutMs: number): Promise<number> {
  const t0 = performance.now();
  let last = "";
  while (performance.now() - t0 < timeoutMs) {
    try {
      if (ok(await query(cs, sql))) return performance.now() - t0;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${sql} on ${new URL(cs).hostname} not as expected after ${timeoutMs} ms${last ? ` (last error: ${last})` : ""}`);
}

/** The agent (e.g. "agent-fsn1") whose instances directory holds `id`. */
export async function agentOf(stack: Stack, id: string): Promise<string | undefined> {
  for (const agent of await readdir(join(stack.dataDir, "agents"))) {
    if (existsSync(join(stack.dataDir, "agents", agent, "instances", id))) return agent;
  }
  return undefined;
}

/** The instance's postmaster.pid: pid, private port and socket directory. */
export async function postmasterOf(stack: Stack, id: string): Promise<{ pid: number; port: number; socketDir: string }> {
  const agent = await agentOf(stack, id);
  if (!agent) throw new Error(`no instance directory for ${id}`);
  const lines = (await readFile(join(stack.dataDir, "agents", agent, "instances", id, "postmaster.pid"), "utf8")).split("\n");
  return { pid: Number(lines[0]), port: Number(lines[3]), socketDir: lines[4]!.split(",")[0]!.trim() };
}

/**
 * `sql` run as the agent's superuser over the instance's unix socket (this test runs as root, or as the agent's
 * user): what a customer's dbadmin may not see, such as pg_replication_slots.
 */
export async function asAgent(stack: Stack, id: string, sql: string, database = "postgres"): Promise<any[]> {
  const { port, socketDir } = await postmasterOf(stack, id);
  const client = new pg.Client({ host: socketDir, port, user: "dbaas_agent", database, connectionTimeoutMillis: 5000 });
  client.on("error", () => {});
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The names of the agent-managed (`dbaas_`) replication slots on instance `id`. */
export async function slotsOn(stack: Stack, id: string): Promise<string[]> {
  const rows = await asAgent(stack, id, "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'dbaas\\_%' ORDER BY 1");
  return rows.map((r: { slot_name: string }) => r.slot_name);
}

/** The slot name of replica `rid` (docs/product.md, Read replicas). */
export const slotName = (rid: string) => `dbaas_${rid.replace(/[^a-z0-9_]/g, "_")}`;
