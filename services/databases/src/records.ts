import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type pg from "pg";
import { newId, notFound } from "@dbaas/kit";
import { DatabaseSchema, OperationSchema, type Database, type Operation } from "@dbaas/proto/databases";
import { notify, AGENT_CHANNEL } from "./change-feed.ts";

export const DATABASE_NAME = "defaultdb";
export const USERNAME = "dbadmin";
export const MASK = "********";

export interface DatabaseRow {
  id: string;
  organization_id: string;
  name: string;
  region: string;
  tier: string;
  version: string;
  status: string;
  status_reason: string;
  agent_id: string;
  port: number;
  desired_state: string;
  generation: string;
  observed_generation: string;
  scram_verifier: string;
  credentials_generation: string;
  applied_credentials_generation: string;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  purge_after: Date | null;
}

/** The organization's live database `id`, locked FOR UPDATE for the caller's transaction; else NOT_FOUND. */
export async function lockOwned(db: pg.ClientBase, orgId: string, id: string): Promise<DatabaseRow> {
  const { rows } = await db.query<DatabaseRow>(
    "SELECT * FROM databases WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL FOR UPDATE",
    [id, orgId],
  );
  if (!rows[0]) throw notFound("database");
  return rows[0];
}

export function hostOf(id: string, domain: string): string {
  return `${id}.${domain}`;
}

export function connectionString(row: Pick<DatabaseRow, "id" | "port">, domain: string, password: string): string {
  return `postgresql://${USERNAME}:${password}@${hostOf(row.id, domain)}:${row.port}/${DATABASE_NAME}?sslmode=require`;
}

export function toDatabase(row: DatabaseRow, domain: string): Database {
  return create(DatabaseSchema, {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    region: row.region,
    tier: row.tier,
    version: row.version,
    status: row.status,
    host: hostOf(row.id, domain),
    port: row.port,
    database: DATABASE_NAME,
    username: USERNAME,
    connectionString: connectionString(row, domain, MASK),
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
    statusReason: row.status_reason,
  });
}

export interface OperationRow {
  id: string;
  database_id: string;
  type: string;
  status: string;
  started_at: Date;
  finished_at: Date | null;
  error: string;
}

export function toOperation(row: OperationRow): Operation {
  return create(OperationSchema, {
    id: row.id,
    databaseId: row.database_id,
    type: row.type,
    status: row.status,
    startedAt: timestampFromDate(row.started_at),
    finishedAt: row.finished_at ? timestampFromDate(row.finished_at) : undefined,
    error: row.error,
  });
}

/**
 * Records a status change: the row, and an outbox event for billing, in the
 * caller's transaction — so billing sees exactly the changes that committed.
 */
export async function setStatus(
  db: pg.ClientBase,
  row: Pick<DatabaseRow, "id" | "organization_id" | "tier">,
  status: string,
  reason = "",
): Promise<void> {
  const { rows } = await db.query<{ updated_at: Date }>(
    "UPDATE databases SET status = $2, status_reason = $3, updated_at = now() WHERE id = $1 RETURNING updated_at",
    [row.id, status, reason],
  );
  const eventId = newId("evt");
  await db.query("INSERT INTO outbox (event_id, topic, payload) VALUES ($1, 'database.status', $2)", [
    eventId,
    {
      event_id: eventId,
      organization_id: row.organization_id,
      database_id: row.id,
      tier: row.tier,
      status,
      occurred_at: rows[0]!.updated_at.toISOString(),
    },
  ]);
}

/** Starts an operation that completes when the agent reports `generation`. */
export async function startOperation(db: pg.ClientBase, databaseId: string, type: string, generation: bigint | string) {
  // A newer operation supersedes one still waiting: the agent converges to the latest spec only.
  await db.query(
    "UPDATE operations SET status = 'failed', finished_at = now(), error = 'superseded by a newer operation' WHERE database_id = $1 AND status = 'running'",
    [databaseId],
  );
  await db.query("INSERT INTO operations (id, database_id, type, status, generation) VALUES ($1, $2, $3, 'running', $4)", [
    newId("op"),
    databaseId,
    type,
    String(generation),
  ]);
}

/** Ends the running operations a report for `generation` settles. */
export async function finishOperations(db: pg.ClientBase, databaseId: string, generation: string, error = ""): Promise<void> {
  await db.query(
    "UPDATE operations SET status = $3, finished_at = now(), error = $4 WHERE database_id = $1 AND status = 'running' AND generation <= $2",
    [databaseId, generation, error ? "failed" : "succeeded", error],
  );
}

/** Tells the owning agent's watch stream to re-send its desired state (after commit). */
export function notifyAgent(db: pg.ClientBase, agentId: string): Promise<void> {
  return notify(db, AGENT_CHANNEL, agentId);
}
