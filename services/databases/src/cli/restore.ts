/**
 * Support tool: restores a deleted database within its retention window.
 *
 *   npm run support:restore -- <database-id>
 *
 * Env: DATABASES_URL (default: the local stack's databases service, derived from PORT as
 * `npm start` derives it), INTERNAL_AUTH_SECRET (default: the local stack's, read from
 * $DBAAS_DATA_DIR/internal-auth-secret). Calls the internal RestoreDatabase RPC as caller
 * "support"; the public gateway has no such route.
 */
import { ConnectError } from "@connectrpc/connect";
import { localStackLayout, localUrl, operatorClient } from "@dbaas/kit";
import { DATABASE_STATUS } from "@dbaas/catalogue";
import { DatabasesService } from "@dbaas/proto/databases";

const id = process.argv[2];
if (!id || !/^db-[a-z0-9]+$/.test(id)) {
  process.stderr.write("usage: npm run support:restore -- <database-id>   (e.g. db-k3x9…)\n");
  process.exit(2);
}
const client = operatorClient(DatabasesService, process.env.DATABASES_URL ?? localUrl(localStackLayout().databases));
try {
  const { database } = await client.restoreDatabase({ id }, { timeoutMs: 10_000 });
  process.stdout.write(
    `restored ${database!.id} (${database!.name}) in organization ${database!.organizationId}: status ${DATABASE_STATUS.read(database!.statusEnum, database!.status)}\n`,
  );
  process.exit(0);
} catch (err) {
  process.stderr.write(`restore failed: ${ConnectError.from(err).rawMessage}\n`);
  process.exit(1);
}
