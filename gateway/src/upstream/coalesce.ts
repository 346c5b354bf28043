import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { createReadBatcher } from "@dbaas/kit";
import {
  GetDatabaseResponseSchema,
  type BatchGetDatabasesResult,
  type DatabasesService,
  type GetDatabaseResponse,
} from "@dbaas/proto/databases";

/** Requests one BatchGetDatabases call may carry: the databases service refuses more. */
const MAX_BATCH_REQUESTS = 100;

interface DatabaseKey {
  organizationId: string;
  id: string;
}

/** What the unary GetDatabase would have answered for the item of `result`. */
function unaryOutcome(result: BatchGetDatabasesResult): GetDatabaseResponse | ConnectError {
  switch (result.result.case) {
    case "database":
      return create(GetDatabaseResponseSchema, { database: result.result.value });
    case "error":
      return new ConnectError(result.result.value.message, result.result.value.code as Code);
    default:
      return new ConnectError("databases answered a batch item with neither a database nor an error", Code.Internal);
  }
}

/**
 * `client` with GetDatabase coalesced: the calls made in the same event-loop
 * iteration (GET /v1/databases/{id} is the API's hottest route, and under load
 * its requests arrive many at a time) leave as one BatchGetDatabases call, so
 * they pay for one HTTP/2 stream and one Connect exchange on either side
 * instead of one each. A lone call still leaves as a plain GetDatabase and
 * waits only for the rest of its iteration.
 *
 * Each caller gets what its own GetDatabase would have given it: the response,
 * or a ConnectError with its item's code and message. A batch call that fails
 * as a whole (upstream down, deadline) rejects all its callers with that error.
 * `client` keeps its own behaviour (deadline, retries, error rewriting) for
 * both RPCs. Callers with call options of their own (signal, deadline,
 * headers) are not coalesced: a shared call could not honour them.
 */
export function coalesceGetDatabase(client: Client<typeof DatabasesService>): Client<typeof DatabasesService> {
  const get = createReadBatcher<DatabaseKey, GetDatabaseResponse>(
    async (keys) => {
      if (keys.length === 1) return [await client.getDatabase(keys[0]!)];
      const res = await client.batchGetDatabases({ requests: keys });
      return res.results.map(unaryOutcome);
    },
    {
      maxBatchSize: MAX_BATCH_REQUESTS,
      // Length-prefixed, so no id can make two different keys look equal.
      keyOf: (k) => `${k.organizationId.length}:${k.organizationId}${k.id}`,
    },
  );
  return {
    ...client,
    getDatabase: (request, options) =>
      options === undefined
        ? get({ organizationId: request.organizationId ?? "", id: request.id ?? "" })
        : client.getDatabase(request, options),
  };
}
