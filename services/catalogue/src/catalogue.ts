/**
 * The product catalogue (docs/product.md, Databases and Billing): regions, tiers and prices (USD), plans,
 * database statuses. One place, read by the databases service (what may be
 * created), the agent (what a tier gives an instance), billing (what it costs)
 * and the gateway (what the API shows). Data, not tables: no service reads
 * another's schema. Where a vocabulary crosses a service boundary as a proto
 * enum (plan, role, database status), `vocabulary.ts` maps it to these names.
 */

/** Sellable instance sizes, smallest first. */
export const TIER_NAMES = ["micro", "small", "medium", "large", "xlarge"] as const;
export type TierName = (typeof TIER_NAMES)[number];

export function isTierName(name: string): name is TierName {
  return (TIER_NAMES as readonly string[]).includes(name);
}

/** What a tier promises the customer (the agent scales memory to the host, not these). */
export interface TierSpec {
  name: TierName;
  vcpu: number;
  memoryGb: number;
  storageGb: number;
  hourlyPrice: number;
  /** Connections the server accepts (`max_connections`): part of the promise, never scaled to the host. */
  maxConnections: number;
}

const TIER_SPECS: Readonly<Record<TierName, Omit<TierSpec, "name">>> = {
  micro: { vcpu: 1, memoryGb: 1, storageGb: 10, hourlyPrice: 0.02, maxConnections: 50 },
  small: { vcpu: 2, memoryGb: 4, storageGb: 40, hourlyPrice: 0.06, maxConnections: 100 },
  medium: { vcpu: 4, memoryGb: 8, storageGb: 100, hourlyPrice: 0.12, maxConnections: 200 },
  large: { vcpu: 8, memoryGb: 16, storageGb: 250, hourlyPrice: 0.24, maxConnections: 400 },
  xlarge: { vcpu: 16, memoryGb: 32, storageGb: 500, hourlyPrice: 0.48, maxConnections: 800 },
};

/**
 * Connection pooler (docs/product.md, Trusted sources and connection pooling): server connections
 * PgBouncer keeps per database by default, about 40 % of the tier's max_connections so that direct
 * sessions, replication and the agent keep room; a customer may set 1 … max_connections − 5.
 */
export const TIER_POOL_SIZE: Readonly<Record<TierName, number>> = { micro: 20, small: 40, medium: 80, large: 160, xlarge: 320 };
/** Client connections one pooler accepts, whatever the tier. */
export const POOLER_MAX_CLIENT_CONNECTIONS = 1000;
/** Pool modes a customer can choose; transaction is the default. */
export const POOLER_MODES = ["transaction", "session"] as const;
export type PoolerMode = (typeof POOLER_MODES)[number];
/** The largest pool_size of `tier`: its max_connections less 5 (the agent's and replication's). */
export const maxPoolSize = (tier: TierName): number => TIER_SPECS[tier].maxConnections - 5;

/** Trusted sources per database at most. */
export const MAX_TRUSTED_SOURCES = 50;

/**
 * The server log (docs/product.md, Inside the database): kept 7 days, or less when a tier's quota fills first (the
 * oldest files go first). Outside the tier's storage: logs are not billed and never make a database read-only.
 */
export const LOG_RETENTION_DAYS = 7;
export const TIER_LOG_QUOTA_MB: Readonly<Record<TierName, number>> = { micro: 256, small: 512, medium: 1024, large: 2048, xlarge: 4096 };

/** Every tier, smallest first. */
export const TIERS: readonly TierSpec[] = TIER_NAMES.map((name) => ({ name, ...TIER_SPECS[name] }));

export const REGIONS: readonly { code: string; name: string }[] = [
  { code: "fsn1", name: "Falkenstein, DE" },
  { code: "nbg1", name: "Nuremberg, DE" },
  { code: "hel1", name: "Helsinki, FI" },
];

export const CURRENCY = "USD";
/** Storage, per GB-month of used bytes. */
export const STORAGE_PRICE_GB_MONTH = 0.125;
/** Data transfer beyond the free allowance, per GB. */
export const TRANSFER_PRICE_GB = 0.05;
export const TRANSFER_FREE_GB_PER_MONTH = 100;

export function tierByName(name: string): TierSpec | undefined {
  return TIERS.find((t) => t.name === name);
}

/** The spec of a tier this build sells. */
export function tierSpec(name: TierName): TierSpec {
  return { name, ...TIER_SPECS[name] };
}

/**
 * PostgreSQL major versions the product offers, newest first. An agent serves
 * those whose server binaries it has, so a version listed here may still find
 * no capacity; one not listed is never accepted.
 */
export const POSTGRES_VERSIONS = ["17", "16"] as const;
export const DEFAULT_POSTGRES_VERSION = "17";

/** Plans a customer can choose. */
export const PLANS = ["free", "pro", "enterprise"] as const;
/** Plans support may also set: `internal` is for our own tooling (benchmarks, synthetic checks). */
export const SUPPORT_PLANS = [...PLANS, "internal"] as const;
export type PlanName = (typeof SUPPORT_PLANS)[number];
/** docs/product.md, Billing: plans that need a payment method in good standing. */
export const PAID_PLANS = ["pro", "enterprise"] as const satisfies readonly PlanName[];

export const isPaidPlan = (plan: string): boolean => (PAID_PLANS as readonly string[]).includes(plan);

/** docs/product.md, Databases: the statuses a database is shown in. */
export const DATABASE_STATUSES = [
  "provisioning",
  "running",
  "starting",
  "stopping",
  "stopped",
  "restarting",
  "resizing",
  "failed",
] as const;
/** Every status a database record has: also deleted (restorable) and purged, which the API never shows. */
export const DATABASE_RECORD_STATUSES = [...DATABASE_STATUSES, "deleted", "purged"] as const;
export type DatabaseStatusName = (typeof DATABASE_RECORD_STATUSES)[number];

/** How a spending alert reaches the organization. */
export const ALERT_CHANNELS = ["email"] as const;

/** Kinds of payment method billing accepts. */
export const PAYMENT_METHOD_TYPES = ["card"] as const;
