import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { createReadBatcher } from "@dbaas/kit";
import type { DatabaseRow } from "./records.ts";

/**
 * Every column of DatabaseRow, named: GET /v1/databases/{id} is the API's
 * hottest read, so it is a named statement (parsed and planned once per
 * connection), and a prepared `SELECT *` would fail on every open connection
 * ("cached plan must not change result type") once a migration adds a column.
 */
const DATABASE_COLUMNS = [
  "id",
  "organization_id",
  "name",
  "region",
  "tier",
  "version",
  "status",
  "status_reason",
  "agent_id",
  "port",
  "desired_state",
  "generation",
  "observed_generation",
  "scram_verifier",
  "credentials_generation",
  "applied_credentials_generation",
  "created_at",
  "updated_at",
  "deleted_at",
  "purge_after",
] as const satisfies readonly (keyof DatabaseRow)[];
// Fails to compile when DatabaseRow gains a field the list above lacks.
type OnlyNever<T extends never> = T;
type AllColumnsNamed = OnlyNever<Exclude<keyof DatabaseRow, (typeof DATABASE_COLUMNS)[number]>>;
/**
 * The live databases of a batch of (id, organization) keys, each row tagged
 * with the 0-based position of the key it matched. The join matches both
 * columns, so a row only ever answers the key of its own organization.
 * The keys travel as two arrays, so the text never changes and the statement
 * stays prepared. The `OFFSET 0` fence hides the arrays' length from the
 * planner: were it seen, every custom plan would look cheaper than the generic
 * one and PostgreSQL would plan the statement anew on each execution.
 */
const GET_DATABASES =
  `SELECT (k.i - 1)::int AS key_index, ${DATABASE_COLUMNS.map((c) => `d.${c}`).join(", ")} ` +
  "FROM (SELECT $1::text[] AS ids, $2::text[] AS organization_ids OFFSET 0) p " +
  "CROSS JOIN LATERAL unnest(p.ids, p.organization_ids) WITH ORDINALITY AS k(id, organization_id, i) " +
  "JOIN databases d ON d.id = k.id AND d.organization_id = k.organization_id WHERE d.deleted_at IS NULL";
/** Keys per GET_DATABASES query: bounds its size and plan; a bigger batch is split. */
const GET_DATABASES_BATCH_SIZE = 100;
/** Requests per BatchGetDatabases call, as the proto documents. */
export const BATCH_GET_MAX_REQUESTS = 100;

export interface DatabaseKey {
  id: string;
  organizationId: string;
}

async function loadLiveDatabases(pool: pg.Pool, keys: DatabaseKey[]): Promise<(DatabaseRow | undefined)[]> {
  const { rows } = await pool.query<DatabaseRow & { key_index: number }>({
    name: "get-databases",
    text: GET_DATABASES,
    values: [keys.map((k) => k.id), keys.map((k) => k.organizationId)],
  });
  const found = new Array<DatabaseRow | undefined>(keys.length);
  for (const row of rows) found[row.key_index] = row;
  return found;
}

/** PostgreSQL text cannot hold NUL: such a key matches no row, and sent along it would fail its whole batch. */
const storable = (key: DatabaseKey) => !key.id.includes("\0") && !key.organizationId.includes("\0");

/**
 * The live database `key` names, looked up together with the other lookups of
 * the same event-loop iteration: GET /v1/databases/{id} is the API's hottest
 * read, and under load its calls arrive many at a time.
 */
export function liveDatabaseReader(pool: pg.Pool): (key: DatabaseKey) => Promise<DatabaseRow | undefined> {
  const batched = createReadBatcher((keys: DatabaseKey[]) => loadLiveDatabases(pool, keys), {
    maxBatchSize: GET_DATABASES_BATCH_SIZE,
    // Unambiguous: keys holding NUL never get here.
    keyOf: (k) => `${k.id}\0${k.organizationId}`,
  });
  return (key) => (storable(key) ? batched(key) : Promise.resolve(undefined));
}

/**
 * What the server would have answered a unary call failing with `err`: its
 * Connect code and message, or a bare internal error, whose cause (e.g. a
 * query's) must not reach the caller.
 */
export function itemError(err: unknown): { code: Code; message: string } {
  if (err instanceof ConnectError) return { code: err.code, message: err.rawMessage };
  return { code: Code.Internal, message: "internal error" };
}
