/**
 * The product catalogue of DESIGN.md: regions, tiers and prices (USD). One
 * place, read by the databases service (what may be created) and by billing
 * (what it costs). Data, not tables: no service reads another's schema.
 */
export interface TierSpec {
  name: string;
  vcpu: number;
  memoryGb: number;
  storageGb: number;
  hourlyPrice: number;
}

export const TIERS: readonly TierSpec[] = [
  { name: "micro", vcpu: 1, memoryGb: 1, storageGb: 10, hourlyPrice: 0.02 },
  { name: "small", vcpu: 2, memoryGb: 4, storageGb: 40, hourlyPrice: 0.06 },
  { name: "medium", vcpu: 4, memoryGb: 8, storageGb: 100, hourlyPrice: 0.12 },
  { name: "large", vcpu: 8, memoryGb: 16, storageGb: 250, hourlyPrice: 0.24 },
  { name: "xlarge", vcpu: 16, memoryGb: 32, storageGb: 500, hourlyPrice: 0.48 },
];

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

/** How a spending alert reaches the organization. */
export const ALERT_CHANNELS = ["email"] as const;

/** Kinds of payment method billing accepts. */
export const PAYMENT_METHOD_TYPES = ["card"] as const;
