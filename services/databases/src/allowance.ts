import type { Logger } from "@dbaas/kit";
import { fitsFreeAllowance, FREE_RUNNING, FREE_TIER, requireGoodStanding, type StandingSource } from "@dbaas/catalogue";
import type pg from "pg";
import { lockRunningTiers } from "./db/databases.ts";

/**
 * Makes sure the organization may run one more database of `tier` (or, with
 * `replaces`, that database at `tier` instead of its current tier): within
 * the free allowance, or with a default payment method on file — else
 * FAILED_PRECONDITION with reason payment_required (the API's 402).
 *
 * Runs inside the caller's transaction and serializes the organization's
 * changes to what it runs (an advisory lock held to the end of the
 * transaction), so two concurrent creates cannot both take the last free
 * slot. Billing is asked only beyond the free allowance: a free
 * organization's micro databases never depend on billing being up.
 */
export async function requireAllowance(
  db: pg.ClientBase,
  billing: StandingSource,
  log: Logger,
  organizationId: string,
  next: { tier: string; replaces?: string },
): Promise<void> {
  const running = await lockRunningTiers(db, organizationId, next.replaces ?? "");
  if (fitsFreeAllowance([...running, next.tier])) return;
  await requireGoodStanding(billing, log, organizationId, `run more than ${FREE_RUNNING} ${FREE_TIER} databases or a larger tier`);
}
