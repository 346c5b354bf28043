/**
 * Support tool: puts an organization on a plan, including `internal` (our own
 * tooling: benchmarks, synthetic checks), which customers cannot choose.
 *
 *   tsx services/identity/src/cli/set-plan.ts <organization-id> <free|pro|enterprise|internal>
 *
 * Env: IDENTITY_URL (default http://127.0.0.1:8081), INTERNAL_AUTH_SECRET (default: the local
 * stack's, from $DBAAS_DATA_DIR/internal-auth-secret). Calls UpdateOrganization as caller "support".
 */
import { ConnectError } from "@connectrpc/connect";
import { createInternalClient, operatorSecret } from "@dbaas/kit";
import { IdentityService } from "@dbaas/proto/identity";

const [organizationId, plan] = process.argv.slice(2);
if (!organizationId || !plan) {
  process.stderr.write("usage: set-plan.ts <organization-id> <free|pro|enterprise|internal>\n");
  process.exit(2);
}
const secret = operatorSecret();
const client = createInternalClient(IdentityService, process.env.IDENTITY_URL ?? "http://127.0.0.1:8081", {
  secret,
  caller: "support",
});
try {
  const { organization } = await client.updateOrganization({ organizationId, plan }, { timeoutMs: 10_000 });
  process.stdout.write(`${organization!.id} (${organization!.name}) is on plan ${organization!.plan}\n`);
  process.exit(0);
} catch (err) {
  process.stderr.write(`set-plan failed: ${ConnectError.from(err).rawMessage}\n`);
  process.exit(1);
}
