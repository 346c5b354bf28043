import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { createReadBatcher } from "@dbaas/kit";
import { loadLiveDatabases, type DatabaseKey, type DatabaseRow } from "./db/databases.ts";

/** Keys per query (db/databases.ts's loadLiveDatabases): bounds its size and plan; a bigger batch is split. */
const GET_DATABASES_BATCH_SIZE = 100;
/** Requests per BatchGetDatabases call, as the proto documents. */
export const BATCH_GET_MAX_REQUESTS = 100;

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
