/**
 * Operator tool: rotates the backups' master key without rewriting a backup.
 * Every database's data keys (`<id>/keys/*.json` in the store) are unwrapped
 * with the previous master key and wrapped again under the new one.
 *
 *   BACKUP_ENCRYPTION_KEY=<new> BACKUP_ENCRYPTION_KEY_PREVIOUS=<old> \
 *     npx tsx services/provisioner-agent/src/cli/rewrap-backup-keys.ts
 *
 * The store is the agents' (BACKUP_STORE_URL, default the local stack's
 * file://$DBAAS_DATA_DIR/backups; S3 settings as the agent reads them).
 * Prints how many keys it re-wrapped; exits 1 when a data key opened under
 * none of the given keys (they are listed: nothing is lost, supply the key
 * that wrapped them in BACKUP_ENCRYPTION_KEY_PREVIOUS and run again).
 * Idempotent, safe while agents run. The full procedure is in the agent's README.
 */
import { ConfigError, requireEnv } from "@dbaas/kit";
import { rewrapDataKeys } from "../backups/encrypted-store.ts";
import { backupKeyring, openRawStore } from "../backups/open-store.ts";
import { backupStoreEnv, backupStoreUrl } from "../config.ts";

async function main(): Promise<number> {
  const env = process.env;
  requireEnv(env, "BACKUP_ENCRYPTION_KEY");
  const storeEnv = backupStoreEnv(env);
  const keyring = backupKeyring(storeEnv)!;
  const store = openRawStore(backupStoreUrl(env), storeEnv);
  const result = await rewrapDataKeys(store, keyring);
  process.stdout.write(
    `${store.description}: ${result.rewrapped} data key(s) re-wrapped under master key ${keyring.current.id}, ` +
      `${result.current} already under it, ${result.failed.length} not opened\n`,
  );
  for (const f of result.failed) process.stdout.write(`  ${f.key}: ${f.error}\n`);
  return result.failed.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof ConfigError ? "" : "rewrap failed: "}${(err as Error).message}\n`);
    process.exit(2);
  },
);
