import { create } from "@bufbuild/protobuf";
import { invalidArgument, notFound } from "@dbaas/kit";
import {
  BatchGetDatabasesResponseSchema,
  GetDatabaseResponseSchema,
  type BatchGetDatabasesRequest,
  type BatchGetDatabasesResponse,
  type GetDatabaseRequest,
  type GetDatabaseResponse,
} from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import type { DatabaseKey } from "../db/databases.ts";
import { BATCH_GET_MAX_REQUESTS, itemError, liveDatabaseReader } from "../live-databases.ts";
import { toDatabase } from "../mappers.ts";

/**
 * GetDatabase and BatchGetDatabases, over one read batcher: the lookups of an
 * event-loop iteration, single or batched, share one query.
 */
export function getDatabases(ctx: AppContext) {
  const liveDatabase = liveDatabaseReader(ctx.pool);

  /** The database GetDatabase answers: a live one of the request's own organization, else NOT_FOUND. */
  const ownedDatabase = async (req: DatabaseKey) => {
    const row = await liveDatabase(req);
    if (!row) throw notFound("database");
    return toDatabase(row, ctx.cfg.databaseDomain);
  };

  return {
    async getDatabase(req: GetDatabaseRequest): Promise<GetDatabaseResponse> {
      return create(GetDatabaseResponseSchema, { database: await ownedDatabase(req) });
    },

    /** Each item answered as GetDatabase would answer it alone: the database, or its error. */
    async batchGetDatabases(req: BatchGetDatabasesRequest): Promise<BatchGetDatabasesResponse> {
      if (req.requests.length > BATCH_GET_MAX_REQUESTS) {
        throw invalidArgument([{ field: "requests", message: `must hold at most ${BATCH_GET_MAX_REQUESTS} requests` }]);
      }
      const results = await Promise.all(
        req.requests.map((item) =>
          ownedDatabase(item).then(
            (database) => ({ result: { case: "database" as const, value: database } }),
            (err: unknown) => ({ result: { case: "error" as const, value: itemError(err) } }),
          ),
        ),
      );
      return create(BatchGetDatabasesResponseSchema, { results });
    },
  };
}
