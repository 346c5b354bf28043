/**
 * Operator tool: what each agent runs — its regions, the address it publishes
 * on (AGENT_PUBLIC_ADDRESS), its own pid, how its servers are isolated
 * (per-tenant-uid, or shared-uid), and every instance it knows, with
 * state, port and postmaster pid.
 *
 *   npm run agent:status [-- <agent-url>…]
 *
 * Without URLs it asks every agent of the local stack (ports derived from PORT,
 * AGENT_BASE_PORT and LOCAL_AGENTS as `npm start` derives them). Env:
 * INTERNAL_AUTH_SECRET (default: the local stack's, from
 * $DBAAS_DATA_DIR/internal-auth-secret). Calls ProvisionerService.GetAgentStatus
 * as caller "support". Exits 1 when an agent does not answer.
 */
import { ConnectError } from "@connectrpc/connect";
import { localStackLayout, localUrl, operatorClient } from "@dbaas/kit";
import { ProvisionerService } from "@dbaas/proto/provisioner";

async function main(): Promise<number> {
  const urls = process.argv.slice(2);
  const targets = urls.length > 0 ? urls : localStackLayout().agents.map((a) => localUrl(a.port));
  let failed = 0;
  for (const url of targets) {
    const client = operatorClient(ProvisionerService, url);
    try {
      const status = await client.getAgentStatus({}, { timeoutMs: 10_000 });
      const running = status.instances.filter((i) => i.state === "running").length;
      process.stdout.write(
        `${status.agentId} (${status.regions.join(",")}) pid ${status.pid}, publishes on ${status.publicAddresses.join(",") || "(unknown)"}, ` +
          `control at ${url}: ${status.instances.length} instance(s), ${running} running, isolation ${status.isolation || "unknown"}\n`,
      );
      const why = status.resourceLimitsReason ? ` (${status.resourceLimitsReason})` : "";
      process.stdout.write(`  resource limits: ${status.resourceLimits || "unknown"}${why}\n`);
      for (const i of status.instances) {
        const where = [i.port ? `port ${i.port}` : "", i.pid ? `pid ${i.pid}` : ""].filter(Boolean).join("  ");
        process.stdout.write(`  ${i.databaseId.padEnd(22)} ${i.state.padEnd(8)} ${where}\n`.trimEnd() + "\n");
      }
    } catch (err) {
      failed++;
      process.stderr.write(`${url}: ${ConnectError.from(err).rawMessage}\n`);
    }
  }
  return failed > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`agent:status failed: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
