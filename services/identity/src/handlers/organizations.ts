import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { callerKey, conflict, dependencyUnavailable, notEnabled, notFound, permissionDenied, Validator, withTransaction } from "@dbaas/kit";
import { isPaidPlan, requireGoodStanding, type Scope } from "@dbaas/catalogue";
import {
  DeleteOrganizationResponseSchema,
  GetOrganizationResponseSchema,
  UpdateOrganizationResponseSchema,
  type DeleteOrganizationRequest,
  type DeleteOrganizationResponse,
  type GetOrganizationRequest,
  type GetOrganizationResponse,
  type UpdateOrganizationRequest,
  type UpdateOrganizationResponse,
} from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import {
  deleteOrganization as deleteOrganizationRow,
  findOrganization,
  lockOrganization,
  organizationExists,
  updateOrganization as updateOrganizationRow,
} from "../db/organizations.ts";
import { organizationToProto } from "../mappers.ts";
import { checkActor, checkName, checkPlan, checkRequired } from "../validation.ts";

/** Who may change the plan (docs/product.md, Roles and permissions: billing is the owner's). */
const CHANGES_PLAN: Scope = "billing:write";

export function getOrganization(ctx: AppContext) {
  return async (req: GetOrganizationRequest): Promise<GetOrganizationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    v.throwIfAny();
    const org = await findOrganization(ctx.pool, req.organizationId);
    if (!org) throw notFound("organization");
    return create(GetOrganizationResponseSchema, { organization: organizationToProto(org) });
  };
}

/**
 * Renames and/or changes the plan. Made for an end user (the gateway) it
 * carries the actor, whose credential must hold billing:write to touch the
 * plan; the support caller (the set-plan tool) sets any plan by contract,
 * `internal` included, with no actor and without asking billing.
 */
export function updateOrganization(ctx: AppContext) {
  return async (req: UpdateOrganizationRequest, handlerCtx: HandlerContext): Promise<UpdateOrganizationResponse> => {
    const support = handlerCtx.values.get(callerKey) === "support";
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = support ? undefined : checkActor(v, req.actor);
    const name = req.name === undefined ? undefined : checkName(v, "name", req.name);
    const plan = checkPlan(v, "plan", req, support);
    v.throwIfAny();
    if (plan !== undefined && actor && !actor.permissions.includes(CHANGES_PLAN)) {
      throw permissionDenied(`this action requires the ${CHANGES_PLAN} permission`);
    }

    const published: string[] = [];
    const org = await withTransaction(ctx.pool, async (db) => {
      const before = await lockOrganization(db, req.organizationId);
      if (!before) throw notFound("organization");
      // Support sets plans by contract (and the internal plan); customers need a payment method for a paid one.
      if (plan !== undefined && plan !== before.plan && isPaidPlan(plan) && !support) {
        await requirePaymentMethod(ctx, req.organizationId);
      }
      const after = await updateOrganizationRow(db, req.organizationId, { name, plan }, ctx.clock.now());
      // Principals carry the plan (it sets the rate limits): cached ones must be refreshed.
      if (after.plan !== before.plan) {
        published.push(await ctx.revocations.publish(db, { organizationId: req.organizationId }));
        ctx.log.info("plan changed", { organization_id: req.organizationId, from: before.plan, to: after.plan });
      }
      return after;
    });
    await ctx.revocations.delivered(published);
    return create(UpdateOrganizationResponseSchema, { organization: organizationToProto(org) });
  };
}

/** docs/product.md, Billing: an organization not in good standing stays on the free plan. */
async function requirePaymentMethod(ctx: AppContext, organizationId: string): Promise<void> {
  if (!ctx.billing) {
    ctx.log.error("cannot move organizations to a paid plan: BILLING_URL is not set");
    throw notEnabled("plan changes are not available");
  }
  await requireGoodStanding(ctx.billing, ctx.log, organizationId, "move to a paid plan");
}

/** How many live (not deleted) databases the organization has, as the databases service counts them. */
async function liveDatabases(ctx: AppContext, organizationId: string): Promise<number> {
  if (!ctx.databases) {
    ctx.log.error("cannot delete organizations: DATABASES_URL is not set");
    throw notEnabled("organization deletion is not available");
  }
  try {
    const res = await ctx.databases.listDatabases({ organizationId, page: 1, perPage: 1 });
    return res.total;
  } catch (err) {
    // Whatever the databases service said, it is not the caller's fault: never pass its code on.
    ctx.log.error("could not count the organization's databases", { organization_id: organizationId, error: err });
    throw dependencyUnavailable("could not check the organization's databases; try again shortly");
  }
}

export function deleteOrganization(ctx: AppContext) {
  return async (req: DeleteOrganizationRequest): Promise<DeleteOrganizationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkActor(v, req.actor);
    v.throwIfAny();
    if (actor.role !== "owner") throw permissionDenied("only the owner can delete the organization");

    if (!(await organizationExists(ctx.pool, req.organizationId))) throw notFound("organization");
    const databases = await liveDatabases(ctx, req.organizationId);
    if (databases > 0) {
      throw conflict(`the organization still has ${databases} database${databases === 1 ? "" : "s"}; delete them first`);
    }
    const published = await withTransaction(ctx.pool, async (db) => {
      if (!(await deleteOrganizationRow(db, req.organizationId))) throw notFound("organization");
      return await ctx.revocations.publish(db, { organizationId: req.organizationId });
    });
    await ctx.revocations.delivered([published]);
    ctx.log.info("organization deleted", { organization_id: req.organizationId, by: actor.userId });
    return create(DeleteOrganizationResponseSchema, {});
  };
}
