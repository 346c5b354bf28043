import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { conflict, invalidArgument, notFound, permissionDenied, Validator, withTransaction } from "@dbaas/kit";
import {
  ListMembersResponseSchema,
  RemoveMemberResponseSchema,
  TransferOwnershipResponseSchema,
  UpdateMemberResponseSchema,
  type ListMembersRequest,
  type ListMembersResponse,
  type RemoveMemberRequest,
  type RemoveMemberResponse,
  type TransferOwnershipRequest,
  type TransferOwnershipResponse,
  type UpdateMemberRequest,
  type UpdateMemberResponse,
} from "@dbaas/proto/identity";
import { roleWithin } from "../authz.ts";
import type { AppContext } from "../context.ts";
import type { Queryable } from "../db/queryable.ts";
import {
  deleteMembership,
  findMemberLogin,
  isMember,
  listMembers as listMemberRows,
  lockMember,
  lockMembersByUser,
  setRole,
  type MemberRow,
} from "../db/memberships.ts";
import { limitedPasswordCheck } from "../login-attempts.ts";
import { memberToProto } from "../mappers.ts";
import { checkActor, checkGivenPassword, checkGrantableRole, checkRequired } from "../validation.ts";

async function lockExistingMember(db: Queryable, organizationId: string, memberId: string): Promise<MemberRow> {
  const row = await lockMember(db, organizationId, memberId);
  if (!row) throw notFound("member");
  return row;
}

export function listMembers(ctx: AppContext) {
  return async (req: ListMembersRequest): Promise<ListMembersResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    v.throwIfAny();
    const rows = await listMemberRows(ctx.pool, req.organizationId);
    return create(ListMembersResponseSchema, { members: rows.map(memberToProto) });
  };
}

export function updateMember(ctx: AppContext) {
  return async (req: UpdateMemberRequest): Promise<UpdateMemberResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkActor(v, req.actor);
    checkRequired(v, "member_id", req.memberId);
    const role = checkGrantableRole(v, "role", req.roleEnum, req.role);
    v.throwIfAny();
    if (!roleWithin(role, actor.role)) throw permissionDenied(`the ${actor.role} role cannot grant the ${role} role`);

    const published: string[] = [];
    const member = await withTransaction(ctx.pool, async (db) => {
      const row = await lockExistingMember(db, req.organizationId, req.memberId);
      if (row.role === "owner") throw conflict("the owner's role cannot be changed; transfer ownership instead");
      if (!roleWithin(row.role, actor.role)) throw permissionDenied(`cannot change the role of a member above your own role`);
      if (row.role === role) return row;
      await setRole(db, row.id, role);
      // Cached principals of this member carry the old role.
      published.push(await ctx.revocations.publish(db, { organizationId: req.organizationId, userId: row.user_id }));
      return { ...row, role };
    });
    await ctx.revocations.delivered(published);
    if (published.length > 0) {
      ctx.log.info("member role changed", { organization_id: req.organizationId, member_id: member.id, role, by: actor.userId });
    }
    return create(UpdateMemberResponseSchema, { member: memberToProto(member) });
  };
}

export function removeMember(ctx: AppContext) {
  return async (req: RemoveMemberRequest): Promise<RemoveMemberResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkActor(v, req.actor);
    checkRequired(v, "member_id", req.memberId);
    v.throwIfAny();

    const published = await withTransaction(ctx.pool, async (db) => {
      const row = await lockExistingMember(db, req.organizationId, req.memberId);
      if (row.role === "owner") throw conflict("the owner cannot be removed; transfer ownership first");
      if (!roleWithin(row.role, actor.role)) throw permissionDenied("cannot remove a member above your own role");
      // Sessions go with the membership; API keys belong to the organization and stay.
      await deleteMembership(db, row.id);
      return await ctx.revocations.publish(db, { organizationId: req.organizationId, userId: row.user_id });
    });
    await ctx.revocations.delivered([published]);
    ctx.log.info("member removed", { organization_id: req.organizationId, member_id: req.memberId, by: actor.userId });
    return create(RemoveMemberResponseSchema, {});
  };
}

const notAMember = () => invalidArgument([{ field: "new_owner_id", message: "must be the user id of a member of this organization" }]);

export function transferOwnership(ctx: AppContext) {
  return async (req: TransferOwnershipRequest): Promise<TransferOwnershipResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkActor(v, req.actor);
    checkRequired(v, "new_owner_id", req.newOwnerId);
    checkGivenPassword(v, "password", req.password);
    v.throwIfAny();

    // Both the credential and the membership must be the owner's: a key made while its
    // creator was an admin stays an admin's key after they become owner.
    const owner = await findMemberLogin(ctx.pool, req.organizationId, actor.userId);
    if (actor.role !== "owner" || owner?.role !== "owner") throw permissionDenied("only the owner can transfer ownership");
    if (req.newOwnerId === actor.userId) throw invalidArgument([{ field: "new_owner_id", message: "is already the owner" }]);
    if (!(await isMember(ctx.pool, req.organizationId, req.newOwnerId))) throw notAMember();
    const passwordOk = await limitedPasswordCheck(ctx, owner.email, async () => {
      return (await ctx.passwords.verify(req.password, owner.password_hash)).ok;
    });
    if (!passwordOk) throw invalidArgument([{ field: "password", message: "is not your current password" }]);

    const published: string[] = [];
    const result = await withTransaction(ctx.pool, async (db) => {
      const rows = await lockMembersByUser(db, req.organizationId, [actor.userId, req.newOwnerId]);
      const previous = rows.find((r) => r.user_id === actor.userId);
      const next = rows.find((r) => r.user_id === req.newOwnerId);
      if (previous?.role !== "owner") throw new ConnectError("ownership changed meanwhile", Code.Aborted);
      if (!next) throw notAMember();
      // In this order: at most one owner at any moment (memberships_one_owner).
      await setRole(db, previous.id, "admin");
      await setRole(db, next.id, "owner");
      for (const userId of [previous.user_id, next.user_id]) {
        published.push(await ctx.revocations.publish(db, { organizationId: req.organizationId, userId }));
      }
      return { owner: { ...next, role: "owner" as const }, previous: { ...previous, role: "admin" as const } };
    });
    await ctx.revocations.delivered(published);
    ctx.log.info("ownership transferred", {
      organization_id: req.organizationId,
      from_user_id: actor.userId,
      to_user_id: req.newOwnerId,
    });
    return create(TransferOwnershipResponseSchema, {
      owner: memberToProto(result.owner),
      previousOwner: memberToProto(result.previous),
    });
  };
}
