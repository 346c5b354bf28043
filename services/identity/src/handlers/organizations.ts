import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  callerKey,
  conflict,
  dependencyUnavailable,
  notEnabled,
  notFound,
  permissionDenied,
  PLANS,
  requireGoodStanding,
  SUPPORT_PLANS,
  Validator,
  withTransaction,
} from "@dbaas/kit";
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
import { organizationToProto, ORGANIZATION_COLUMNS, type OrganizationRow } from "../mappers.ts";
import { checkActor, checkName, checkRequired } from "../validation.ts";

export function getOrganization(ctx: AppContext) {
  return async (req: GetOrganizationRequest): Promise<GetOrganizationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    v.throwIfAny();
    const result = await ctx.pool.query<OrganizationRow>(
      `SELECT ${ORGANIZATION_COLUMNS} FROM organizations WHERE id = $1`,
      [req.organizationId],
    );
    const org = result.rows[0];
    if (!org) throw notFound("organization");
    return create(GetOrganizationResponseSchema, { organization: organizationToProto(org) });
  };
}

export function updateOrganization(ctx: AppContext) {
  return async (req: UpdateOrganizationRequest, handlerCtx: HandlerContext): Promise<UpdateOrganizationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const name = req.name === undefined ? undefined : checkName(v, "name", req.name);
    const support = handlerCtx.values.get(callerKey) === "support";
    if (req.plan !== undefined) v.oneOf("plan", req.plan, support ? SUPPORT_PLANS : PLANS);
    v.throwIfAny();

    const published: string[] = [];
    const org = await withTransaction(ctx.pool, async (db) => {
      const current = await db.query<OrganizationRow>(
        `SELECT ${ORGANIZATION_COLUMNS} FROM organizations WHERE id = $1 FOR UPDATE`,
        [req.organizationId],
      );
      const before = current.rows[0];
      if (!before) throw notFound("organization");
      // Support sets plans by contract (and the internal plan); customers need a payment method for a paid one.
      if (req.plan !== undefined && req.plan !== before.plan && req.plan !== "free" && !support) {
        await requirePaymentMethod(ctx, req.organizationId);
      }
      const updated = await db.query<OrganizationRow>(
        `UPDATE organizations SET name = COALESCE($2, name), plan = COALESCE($3, plan), updated_at = $4
         WHERE id = $1 RETURNING ${ORGANIZATION_COLUMNS}`,
        [req.organizationId, name ?? null, req.plan ?? null, ctx.clock.now()],
      );
      const after = updated.rows[0]!;
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

/** DESIGN.md, Billing: an organization not in good standing stays on the free plan. */
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

    const exists = await ctx.pool.query("SELECT 1 FROM organizations WHERE id = $1", [req.organizationId]);
    if (!exists.rowCount) throw notFound("organization");
    const databases = await liveDatabases(ctx, req.organizationId);
    if (databases > 0) {
      throw conflict(`the organization still has ${databases} database${databases === 1 ? "" : "s"}; delete them first`);
    }
    const published = await withTransaction(ctx.pool, async (db) => {
      // Memberships, sessions, API keys, invitations and their unsent mails go with it (ON DELETE CASCADE).
      const deleted = await db.query("DELETE FROM organizations WHERE id = $1", [req.organizationId]);
      if (!deleted.rowCount) throw notFound("organization");
      return await ctx.revocations.publish(db, { organizationId: req.organizationId });
    });
    await ctx.revocations.delivered([published]);
    ctx.log.info("organization deleted", { organization_id: req.organizationId, by: actor.userId });
    return create(DeleteOrganizationResponseSchema, {});
  };
}
