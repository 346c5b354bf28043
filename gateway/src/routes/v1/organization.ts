import { TOKEN_MAX_LENGTH } from "@dbaas/kit";
import { GRANTABLE_ROLES, PLANS } from "@dbaas/catalogue";
import { created, noContent, ok, type Reply } from "../../middleware/envelope.ts";
import { body, describe, emailAddress, oneOf, optional, PAGINATION_QUERY, text, type Infer } from "../../schema.ts";
import { ID } from "../ids.ts";
import { actorOf, pageOf, planFields, present, roleFields } from "../mappers.ts";
import { ACCEPTANCE, INVITATION, MEMBER, ORGANIZATION, TRANSFER } from "../responses-identity.ts";
import type { AuthedCall, Call } from "../route.ts";
import { displayName, password } from "./auth.ts";

const OWNER_BY_TRANSFER = "owner is reached only by transferring ownership (POST /v1/organization/transfer)";

const role = (description: string) => oneOf(GRANTABLE_ROLES, description, OWNER_BY_TRANSFER);

export const updateOrganizationBody = body({
  name: optional(displayName("New name of the organization.")),
  plan: optional(oneOf(PLANS, "The plan; changing it needs billing:write (the owner), which identity checks.")),
});

export const inviteBody = body({
  email: emailAddress("Address the invitation is mailed to."),
  role: role("At most the caller's own role; owner only by transfer."),
});

export const updateMemberBody = body({
  role: role("The new role; the owner's role cannot be changed, and owner is reached only by transfer."),
});

export const transferBody = body({
  new_owner_id: describe(ID.user.schema, "User id (user.id of a member record) of the member who becomes owner."),
  password: password("The caller's current password."),
});

export const acceptBody = body({
  token: text(TOKEN_MAX_LENGTH, "The one-time token from the invitation link."),
  name: optional(displayName("Display name of a new user (then required); ignored when the e-mail already has an account.")),
  password: password("Password of the new user, or the existing account's password."),
});

export const listQuery = PAGINATION_QUERY;

/** Who is asking, as identity judges every change: the credential's role and permissions, not just the user's. */
const actor = ({ principal }: AuthedCall<unknown>) => actorOf(principal);

export async function getOrganization(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.identity.getOrganization({ organizationId: call.principal.organizationId });
  return ok(ORGANIZATION.map(present(res.organization, "organization")));
}

/**
 * The route needs settings:write (docs/product.md, Roles and permissions: change settings); the plan is
 * billing, which only billing:write (the owner) may change: identity decides
 * that from the actor's permissions (403 insufficient_permissions).
 */
export async function updateOrganization(call: AuthedCall<Infer<typeof updateOrganizationBody>>): Promise<Reply> {
  const { body, principal } = call;
  const res = await call.ctx.identity.updateOrganization({
    organizationId: principal.organizationId,
    actor: actor(call),
    name: body.name,
    ...(body.plan !== undefined && planFields(body.plan)),
  });
  return ok(ORGANIZATION.map(present(res.organization, "organization")));
}

export async function deleteOrganization(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.identity.deleteOrganization({ organizationId: call.principal.organizationId, actor: actor(call) });
  return noContent();
}

export async function listMembers(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.identity.listMembers({ organizationId: call.principal.organizationId });
  return pageOf("members", res.members, call.query, MEMBER.map);
}

export async function inviteMember(call: AuthedCall<Infer<typeof inviteBody>>): Promise<Reply> {
  const res = await call.ctx.identity.createInvitation({
    organizationId: call.principal.organizationId,
    actor: actor(call),
    email: call.body.email,
    ...roleFields(call.body.role),
  });
  return created(INVITATION.map(present(res.invitation, "invitation")));
}

export async function updateMember(call: AuthedCall<Infer<typeof updateMemberBody>>): Promise<Reply> {
  const res = await call.ctx.identity.updateMember({
    organizationId: call.principal.organizationId,
    actor: actor(call),
    memberId: call.params.id,
    ...roleFields(call.body.role),
  });
  return ok(MEMBER.map(present(res.member, "member")));
}

export async function removeMember(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.identity.removeMember({
    organizationId: call.principal.organizationId,
    actor: actor(call),
    memberId: call.params.id,
  });
  return noContent();
}

export async function listInvitations(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.identity.listInvitations({ organizationId: call.principal.organizationId });
  return pageOf("invitations", res.invitations, call.query, INVITATION.map);
}

export async function cancelInvitation(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.identity.cancelInvitation({ organizationId: call.principal.organizationId, id: call.params.id });
  return noContent();
}

/** 200 `{owner, previous_owner}`: both member records as they are after the transfer. */
export async function transferOwnership(call: AuthedCall<Infer<typeof transferBody>>): Promise<Reply> {
  const res = await call.ctx.identity.transferOwnership({
    organizationId: call.principal.organizationId,
    actor: actor(call),
    newOwnerId: call.body.new_owner_id,
    password: call.body.password,
  });
  return ok(TRANSFER.map(res));
}

/** Public: the token is the credential. 201 with the new membership and a login token acting in it. */
export async function acceptInvitation({ ctx, body }: Call<Infer<typeof acceptBody>>): Promise<Reply> {
  const res = await ctx.identity.acceptInvitation({ token: body.token, name: body.name, password: body.password });
  return created(ACCEPTANCE.map(res));
}
