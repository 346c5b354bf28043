import type { Logger } from "@dbaas/kit";
import type { Config } from "./config.ts";
import type { InstanceRuntime } from "./runtime.ts";

/**
 * The agent's start-up word on tenant isolation (docs/product.md, "Tenant isolation
 * on an agent host"). An agent that cannot switch users (not root, without
 * CAP_SETUID/CAP_SETGID/CAP_CHOWN) runs every server as itself: it says so,
 * and with NODE_ENV=production refuses to start unless AGENT_ALLOW_SHARED_UID=1.
 * Throws the refusal; the agent status and /healthz repeat `runtime.isolation`.
 */
export function announceIsolation(
  cfg: Pick<Config, "production" | "allowSharedUid" | "tenantUidRange">,
  runtime: Pick<InstanceRuntime, "isolation">,
  log: Logger,
): void {
  if (runtime.isolation === "per-tenant-uid") {
    log.info("isolation: per-tenant-uid: every server runs as a user of its own", {
      tenant_uid_range: `${cfg.tenantUidRange[0]}-${cfg.tenantUidRange[1]}`,
    });
    return;
  }
  const why = `isolation: shared-uid: this agent (uid ${process.getuid?.()}) cannot switch users (not root, and without CAP_SETUID, CAP_SETGID and CAP_CHOWN), so every server runs as the agent: a tenant's server could reach the others' data`;
  if (cfg.production && !cfg.allowSharedUid)
    throw new Error(
      `${why}. Refusing to start with NODE_ENV=production; run the agent as root (or with those capabilities), or set AGENT_ALLOW_SHARED_UID=1 to accept it`,
    );
  log.warn(why);
}
