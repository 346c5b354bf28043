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
import type pg from "pg";
import { roleWithin, type RoleName } from "../authz.ts";
import type { AppContext } from "../context.ts";
import { limitedPasswordCheck } from "../login-attempts.ts";
import { MEMBER_COLUMNS, memberToProto, type MemberRow } from "../mappers.ts";
import { checkActor, checkGivenPassword, checkGrantableRole, checkRequired } from "../validation.ts";

async function lockMember(db: pg.PoolClient, organizationId: string, memberId: string): Promise<MemberRow> {
  const found = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.id = $1 AND m.organization_id = $2 FOR UPDATE OF m`,
    [memberId, organizationId],
  );
  const row = found.rows[0];
  if (!row) throw notFound("member");
  return row;
}

export function listMembers(ctx: AppContext) {
  return async (req: ListMembersRequest): Promise<ListMembersResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    v.throwIfAny();
    const result = await ctx.pool.query<MemberRow>(
      `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id
       WHERE m.organization_id = $1 ORDER BY m.created_at, m.id`,
      [req.organizationId],
    );
    return create(ListMembersResponseSchema, { members: result.rows.map(memberToProto) });
  };
}

export function updateMember(ctx: AppContext) {
  return async (req: UpdateMemberRequest): Promise<UpdateMemberResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkActor(v, req.actor);
    checkRequired(v, "member_id", req.memberId);
    const role = checkGrantableRole(v, "role", req.role);
    v.throwIfAny();
    if (!roleWithin(role, actor.role)) throw permissionDenied(`the ${actor.role} role cannot grant the ${role} role`);

    const published: string[] = [];
    const member = await withTransaction(ctx.pool, async (db) => {
      const row = await lockMember(db, req.organizationId, req.memberId);
      if (row.role === "owner") throw conflict("the owner's role cannot be changed; transfer ownership instead");
      if (!roleWithin(row.role, actor.role)) throw permissionDenied(`cannot change the role of a member above your own role`);
      if (row.role === role) return row;
      await db.query("UPDATE memberships SET role = $2 WHERE id = $1", [row.id, role]);
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
      const row = await lockMember(db, req.organizationId, req.memberId);
      if (row.role === "owner") throw conflict("the owner cannot be removed; transfer ownership first");
      if (!roleWithin(row.role, actor.role)) throw permissionDenied("cannot remove a member above your own role");
      // Sessions go with the membership (ON DELETE CASCADE); API keys belong to the organization and stay.
      await db.query("DELETE FROM memberships WHERE id = $1", [row.id]);
      return await ctx.revocations.publish(db, { organizationId: req.organizationId, userId: row.user_id });
    });
    await ctx.revocations.delivered([published]);
    ctx.log.info("member removed", { organization_id: req.organizationId, member_id: req.memberId, by: actor.userId });
    return create(RemoveMemberResponseSchema, {});
  };
}

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
    const caller = await ctx.pool.query<{ role: RoleName; email: string; password_hash: string }>(
      `SELECT m.role, u.email, u.password_hash FROM memberships m JOIN users u ON u.id = m.user_id
       WHERE m.organization_id = $1 AND m.user_id = $2`,
      [req.organizationId, actor.userId],
    );
    const owner = caller.rows[0];
    if (actor.role !== "owner" || owner?.role !== "owner") throw permissionDenied("only the owner can transfer ownership");
    if (req.newOwnerId === actor.userId) throw invalidArgument([{ field: "new_owner_id", message: "is already the owner" }]);
    const target = await ctx.pool.query("SELECT 1 FROM memberships WHERE organization_id = $1 AND user_id = $2", [
      req.organizationId,
      req.newOwnerId,
    ]);
    if (!target.rowCount) {
      throw invalidArgument([{ field: "new_owner_id", message: "must be the user id of a member of this organization" }]);
    }
    const passwordOk = await limitedPasswordCheck(ctx, owner.email, async () => {
      return (await ctx.passwords.verify(req.password, owner.password_hash)).ok;
    });
    if (!passwordOk) throw invalidArgument([{ field: "password", message: "is not your current password" }]);

    const published: string[] = [];
    const result = await withTransaction(ctx.pool, async (db) => {
      const rows = await db.query<MemberRow>(
        `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.organization_id = $1 AND m.user_id = ANY($2) ORDER BY m.id FOR UPDATE OF m`,
        [req.organizationId, [actor.userId, req.newOwnerId]],
      );
      const previous = rows.rows.find((r) => r.user_id === actor.userId);
      const next = rows.rows.find((r) => r.user_id === req.newOwnerId);
      if (previous?.role !== "owner") throw new ConnectError("ownership changed meanwhile", Code.Aborted);
      if (!next) throw invalidArgument([{ field: "new_owner_id", message: "must be the user id of a member of this organization" }]);
      // In this order: at most one owner at any moment (memberships_one_owner).
      await db.query("UPDATE memberships SET role = 'admin' WHERE id = $1", [previous.id]);
      await db.query("UPDATE memberships SET role = 'owner' WHERE id = $1", [next.id]);
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
