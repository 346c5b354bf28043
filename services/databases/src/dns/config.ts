import { ConfigError, envInt, envString } from "@dbaas/kit";
import { parseServer, parseTsigKey, type Server, type TsigKey } from "./wire.ts";

/**
 * Where the databases' host names are published (docs/product.md, "Host names in DNS"):
 * `none` — one host, a wildcard record someone else keeps (today's
 * behaviour); `rfc2136` — every host name's A/AAAA records kept on an
 * authoritative server through TSIG-signed dynamic updates.
 */
export type DnsConfig =
  | { provider: "none" }
  | {
      provider: "rfc2136";
      /** DNS_SERVER: host:port of the primary authoritative server. */
      server: Server;
      /** DNS_ZONE: the zone the updates name; DATABASE_DOMAIN lies in it. */
      zone: string;
      /** DNS_TSIG_KEY: hmac-sha256:<name>:<base64 secret>. */
      key: TsigKey;
      /** DNS_TTL_SECONDS (30): the records' TTL (a database with standbys will ask for less: records.ts recordTtl). */
      ttlSeconds: number;
      /** DNS_TIMEOUT_MS (3000): how long one exchange with the server may take. */
      timeoutMs: number;
      /** DNS_RECONCILE_INTERVAL_MS (30 s): how often every record is compared with the server's answer and repaired. */
      reconcileIntervalMs: number;
    };

const within = (name: string, zone: string) => name === zone || name.endsWith(`.${zone}`);

export function readDnsConfig(env: Record<string, string | undefined>, databaseDomain: string): DnsConfig {
  const provider = envString(env, "DNS_PROVIDER", "none");
  if (provider === "none") return { provider };
  if (provider !== "rfc2136") throw new ConfigError(`DNS_PROVIDER must be none or rfc2136, got "${provider}"`);
  const missing = ["DNS_SERVER", "DNS_ZONE", "DNS_TSIG_KEY"].filter((k) => !env[k]);
  if (missing.length > 0) throw new ConfigError(`DNS_PROVIDER=rfc2136 needs ${missing.join(", ")}`);
  const zone = env.DNS_ZONE!.replace(/\.$/, "").toLowerCase();
  if (!within(databaseDomain.toLowerCase(), zone)) {
    throw new ConfigError(`DATABASE_DOMAIN (${databaseDomain}) must lie in DNS_ZONE (${zone}): the host names are published there`);
  }
  try {
    const ttlSeconds = envInt(env, "DNS_TTL_SECONDS", 30);
    if (ttlSeconds < 1) throw new Error(`DNS_TTL_SECONDS must be positive, got ${ttlSeconds}`);
    return {
      provider,
      server: parseServer(env.DNS_SERVER!),
      zone,
      key: parseTsigKey(env.DNS_TSIG_KEY!),
      ttlSeconds,
      timeoutMs: envInt(env, "DNS_TIMEOUT_MS", 3000),
      reconcileIntervalMs: envInt(env, "DNS_RECONCILE_INTERVAL_MS", 30_000),
    };
  } catch (e) {
    throw e instanceof ConfigError ? e : new ConfigError((e as Error).message);
  }
}
