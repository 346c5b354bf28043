import { create } from "@bufbuild/protobuf";
import { notFound, Validator } from "@dbaas/kit";
import {
  GetOrganizationResponseSchema,
  type GetOrganizationRequest,
  type GetOrganizationResponse,
} from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { organizationToProto, ORGANIZATION_COLUMNS, type OrganizationRow } from "../mappers.ts";
import { checkRequired } from "../validation.ts";

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
