/**
 * Support tool: puts an organization on a plan, including `internal` (our own
 * tooling: benchmarks, synthetic checks), which customers cannot choose.
 *
 *   npm run set-plan -- <organization-id> <free|pro|enterprise|internal>
 *
 * Env: IDENTITY_URL (default: the local stack's identity service, derived from PORT as `npm start`
 * derives it), INTERNAL_AUTH_SECRET (default: the local stack's, from
 * $DBAAS_DATA_DIR/internal-auth-secret). Calls UpdateOrganization as caller "support".
 */
import { ConnectError } from "@connectrpc/connect";
import { localStackLayout, localUrl, operatorClient } from "@dbaas/kit";
import { PLAN } from "@dbaas/catalogue";
import { IdentityService } from "@dbaas/proto/identity";

const [organizationId, plan] = process.argv.slice(2);
if (!organizationId || !plan) {
  process.stderr.write("usage: npm run set-plan -- <organization-id> <free|pro|enterprise|internal>\n");
  process.exit(2);
}
const client = operatorClient(IdentityService, process.env.IDENTITY_URL ?? localUrl(localStackLayout().identity));
try {
  // The enum and, for an identity that predates it, the name; a name the kit does not know goes as given, for identity to refuse.
  const { organization } = await client.updateOrganization({ organizationId, planEnum: PLAN.value(plan), plan }, { timeoutMs: 10_000 });
  process.stdout.write(`${organization!.id} (${organization!.name}) is on plan ${PLAN.read(organization!.planEnum, organization!.plan)}\n`);
  process.exit(0);
} catch (err) {
  process.stderr.write(`set-plan failed: ${ConnectError.from(err).rawMessage}\n`);
  process.exit(1);
}
