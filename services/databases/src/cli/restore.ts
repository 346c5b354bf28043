/**
 * Support tool: restores a deleted database within its retention window.
 *
 *   tsx services/databases/src/cli/restore.ts <database-id>
 *
 * Env: DATABASES_URL (default http://127.0.0.1:8082), INTERNAL_AUTH_SECRET (default: the local
 * stack's, read from $DBAAS_DATA_DIR/internal-auth-secret). Calls the internal
 * RestoreDatabase RPC as caller "support"; the public gateway has no such route.
 */
import { ConnectError } from "@connectrpc/connect";
import { createInternalClient, operatorSecret } from "@dbaas/kit";
import { DatabasesService } from "@dbaas/proto/databases";

const id = process.argv[2];
if (!id || !/^db-[a-z0-9]+$/.test(id)) {
  process.stderr.write("usage: restore.ts <database-id>   (e.g. db-k3x9…)\n");
  process.exit(2);
}
const secret = operatorSecret();
const client = createInternalClient(DatabasesService, process.env.DATABASES_URL ?? "http://127.0.0.1:8082", {
  secret,
  caller: "support",
});
try {
  const { database } = await client.restoreDatabase({ id }, { timeoutMs: 10_000 });
  process.stdout.write(`restored ${database!.id} (${database!.name}) in organization ${database!.organizationId}: status ${database!.status}\n`);
  process.exit(0);
} catch (err) {
  process.stderr.write(`restore failed: ${ConnectError.from(err).rawMessage}\n`);
  process.exit(1);
}
