/**
 * Management of real PostgreSQL server instances on this host: server
 * binaries from npm, per-version template data directories, TLS from an
 * agent-local CA, tier-based settings, and the instance lifecycle.
 */
export { findServerBinaries, type ServerBinaries } from "./binaries.ts";
export { resolveRunAs, runCommand, serverEnv, CommandError, type RunAsIdentity, type RunOptions, type RunResult } from "./run-as.ts";
export {
  loadOrCreateCA,
  issueServerCertificate,
  ensureServerCertificate,
  checkHostname,
  type AgentCA,
  type FileOwner,
  type IssueOptions,
} from "./tls.ts";
export {
  tierSettings,
  defaultMemoryScale,
  isTierName,
  TIER_NAMES,
  TIERS,
  TARGET_MICRO_DENSITY,
  type TierName,
  type TierSettingsOptions,
} from "./tier-settings.ts";
export {
  createInstanceManager,
  AGENT_SUPERUSER,
  ADMIN_ROLE,
  DEFAULT_DATABASE,
  type InstanceManager,
  type InstanceManagerOptions,
  type InstanceObservation,
  type InstanceResourceUsage,
  type InstanceState,
  type ProvisionOptions,
  type StartOptions,
} from "./instance-manager.ts";
export { probeTlsLogin, type TlsLoginProbe } from "./probe.ts";
