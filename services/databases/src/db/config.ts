// SQL of databases' configuration overrides (database_config) and of the agents' per-tier defaults.
import { traceContext } from "@dbaas/kit";
import type pg from "pg";

type Db = pg.Pool | pg.ClientBase;

export interface ConfigRow {
  parameters: Record<string, string>;
  generation: string;
  applied_generation: string;
  pending_restart: string[];
}

const NONE: ConfigRow = { parameters: {}, generation: "0", applied_generation: "0", pending_restart: [] };

/** Database `id`'s overrides and what its agent last reported of them (none: an empty row). */
export async function configOf(db: Db, id: string): Promise<ConfigRow> {
  const { rows } = await db.query<ConfigRow>(
    "SELECT parameters, generation, applied_generation, pending_restart FROM database_config WHERE database_id = $1",
    [id],
  );
  return rows[0] ?? NONE;
}

/**
 * The overrides become `parameters`, a new generation; answers it. The caller holds the database's row lock.
 * The request's trace context goes with the spec (databases.trace_context), so the agent's apply joins its trace.
 */
export async function saveParameters(db: pg.ClientBase, id: string, parameters: Record<string, string>): Promise<bigint> {
  const trace = traceContext();
  if (Object.keys(trace).length > 0)
    await db.query("UPDATE databases SET trace_context = $2, trace_context_at = now() WHERE id = $1", [id, trace]);
  const { rows } = await db.query<{ generation: string }>(
    `INSERT INTO database_config (database_id, parameters, generation) VALUES ($1, $2, 1)
     ON CONFLICT (database_id) DO UPDATE SET parameters = $2, generation = database_config.generation + 1, updated_at = now()
     RETURNING generation`,
    [id, JSON.stringify(parameters)],
  );
  return BigInt(rows[0]!.generation);
}

/**
 * What an agent reported of database `id`'s configuration: the generation its server has (never moving
 * back) and, with it, what waits for a restart. Answers whether the applied generation advanced.
 */
export async function recordConfigObserved(db: pg.ClientBase, id: string, applied: bigint, pending: string[]): Promise<boolean> {
  const { rows } = await db.query<{ advanced: boolean }>(
    `WITH before AS (SELECT applied_generation FROM database_config WHERE database_id = $1)
     INSERT INTO database_config (database_id, applied_generation, pending_restart) VALUES ($1, $2, $3)
     ON CONFLICT (database_id) DO UPDATE SET
       pending_restart = CASE WHEN $2 >= database_config.applied_generation THEN $3 ELSE database_config.pending_restart END,
       applied_generation = GREATEST(database_config.applied_generation, $2)
     RETURNING COALESCE((SELECT $2 > applied_generation FROM before), $2 > 0) AS advanced`,
    [id, String(applied), pending],
  );
  return rows[0]!.advanced;
}

/** A restored database starts with its source's overrides. */
export async function copyConfig(db: pg.ClientBase, fromId: string, toId: string): Promise<void> {
  await db.query(
    `INSERT INTO database_config (database_id, parameters, generation)
     SELECT $2, parameters, 1 FROM database_config WHERE database_id = $1 AND parameters <> '{}'::jsonb`,
    [fromId, toId],
  );
}

/** What agent `agentId`'s servers of `tier` run with before overrides (as it registered them). */
export async function tierDefaults(db: Db, agentId: string, tier: string): Promise<Record<string, string>> {
  const { rows } = await db.query<{ settings: Record<string, string> | null }>(
    "SELECT tier_settings -> $2 AS settings FROM agents WHERE id = $1",
    [agentId, tier],
  );
  return rows[0]?.settings ?? {};
}
