import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { conflict, dependencyUnavailable, notEnabled, notFound, Validator, withTransaction } from "@dbaas/kit";
import { fitsFreeAllowance, FREE_RUNNING, FREE_TIER, isPaidPlan, PLAN } from "@dbaas/catalogue";
import { DeletePaymentMethodResponseSchema, type DeletePaymentMethodRequest, type DeletePaymentMethodResponse } from "@dbaas/proto/billing";
import type pg from "pg";
import type { AppContext } from "../context.ts";
import { countPaymentMethods, findPaymentMethod, lockPaymentMethods, removePaymentMethod } from "../db/payment-methods.ts";
import { latestDatabaseStatuses } from "../db/status-events.ts";
import { detachRemovedPaymentMethods } from "../payment-methods/detach.ts";
import { checkOrganizationId } from "../validation.ts";

/**
 * The statuses of a database or replica that neither runs nor is on its way
 * to running (`promoted`: a replica retired into a database of its own).
 * Anything else counts as running (a failed database is retried by its agent),
 * so an unknown status errs on the side of keeping the card.
 */
const NOT_RUNNING = new Set(["stopping", "stopped", "deleted", "purged", "promoted"]);

/** How long identity may take to say the organization's plan. */
const PLAN_TIMEOUT_MS = 5_000;

/** The organization's plan as identity has it; undefined when identity no longer knows the organization. */
async function planOf(ctx: AppContext, organizationId: string): Promise<string | undefined> {
  if (!ctx.identity) {
    ctx.log.error("cannot tell whether the organization's plan needs its payment method: IDENTITY_URL is not set", {
      organization_id: organizationId,
    });
    throw notEnabled("removing the last payment method is not available");
  }
  try {
    const { organization } = await ctx.identity.getOrganization({ organizationId }, { timeoutMs: PLAN_TIMEOUT_MS });
    return organization && PLAN.read(organization.planEnum, organization.plan);
  } catch (err) {
    if (ConnectError.from(err).code === Code.NotFound) return undefined;
    ctx.log.error("could not ask identity for the organization's plan", { organization_id: organizationId, error: err });
    throw dependencyUnavailable("could not check the organization's plan; try again shortly");
  }
}

/**
 * Refuses (FAILED_PRECONDITION, the API's 409) to let the default go while
 * anything needs it, saying what to do first. docs/product.md, Billing: without a
 * default payment method an organization runs at most 2 micro databases and
 * stays on the free plan; a read replica is never free. What runs is what
 * billing's own status events say (they are how it meters); the plan is identity's.
 */
async function requireDefaultUnneeded(ctx: AppContext, db: pg.PoolClient, organizationId: string): Promise<void> {
  if ((await countPaymentMethods(db, organizationId)) > 1) {
    throw conflict(
      "the default payment method can be removed only when it is the last one: make another payment method the default first " +
        "(PATCH /v1/billing/payment-methods/{id} with default: true), then remove this one",
    );
  }
  const live = (await latestDatabaseStatuses(db, organizationId)).filter((d) => !NOT_RUNNING.has(d.status));
  const replicas = live.filter((d) => d.kind === "replica");
  if (replicas.length > 0) {
    const names = replicas.map((d) => `${d.databaseId} (${d.tier})`).join(", ");
    throw conflict(
      `the organization runs read replicas, which need a payment method: ${names}; ` +
        "delete them (DELETE /v1/databases/{id}/replicas/{replica_id}) before removing the last payment method",
    );
  }
  const running = live.filter((d) => d.kind === "database");
  if (!fitsFreeAllowance(running.map((d) => d.tier))) {
    const names = running.map((d) => `${d.databaseId} (${d.tier})`).join(", ");
    throw conflict(
      `the organization runs more than the free allowance (at most ${FREE_RUNNING} ${FREE_TIER} databases), which needs a payment method: ` +
        `${names}; stop the databases that need a card (POST /v1/databases/{id}/stop) before removing the last payment method`,
    );
  }
  const plan = await planOf(ctx, organizationId);
  if (plan !== undefined && isPaidPlan(plan)) {
    throw conflict(`the ${plan} plan needs a payment method: move the organization to the free plan first (PATCH /v1/organization)`);
  }
}

/**
 * Removes a payment method: at once for one that is not the default; the
 * default only as the last one and when nothing needs it. The removal is
 * committed under the organization's payment-method lock (so no concurrent
 * add, switch or removal sees half of it), then the processor is told to
 * detach the card; a detach that fails is retried by the background loop,
 * and the method is never charged again either way.
 */
export function deletePaymentMethod(ctx: AppContext) {
  return async (req: DeletePaymentMethodRequest): Promise<DeletePaymentMethodResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    if (req.id === "") v.add("id", "is required");
    v.throwIfAny();

    const org = req.organizationId;
    const removed = await withTransaction(ctx.pool, async (db) => {
      await lockPaymentMethods(db, org);
      const found = await findPaymentMethod(db, org, req.id);
      if (!found) throw notFound("payment method");
      if (found.is_default) await requireDefaultUnneeded(ctx, db, org);
      await removePaymentMethod(db, org, found.id, ctx.clock.now());
      return found;
    });
    ctx.log.info("payment method removed", { organization_id: org, payment_method_id: removed.id, was_default: removed.is_default });
    await detachRemovedPaymentMethods(ctx, { id: removed.id });
    return create(DeletePaymentMethodResponseSchema, {});
  };
}
