import { create } from "@bufbuild/protobuf";
import { newId, notFound, permissionDenied, Validator, withTransaction } from "@dbaas/kit";
import {
  CancelInvitationResponseSchema,
  CreateInvitationResponseSchema,
  ListInvitationsResponseSchema,
  type CancelInvitationRequest,
  type CancelInvitationResponse,
  type CreateInvitationRequest,
  type CreateInvitationResponse,
  type ListInvitationsRequest,
  type ListInvitationsResponse,
} from "@dbaas/proto/identity";
import { roleWithin } from "../authz.ts";
import type { AppContext } from "../context.ts";
import { hashSecret, newInvitationToken } from "../credentials.ts";
import { isUniqueViolation } from "../db/errors.ts";
import { cancelInvitation as cancelInvitationRow, expirePending, insertInvitation, listPendingInvitations } from "../db/invitations.ts";
import { withdrawInvitationMail } from "../db/mail-outbox.ts";
import { emailIsMember } from "../db/memberships.ts";
import { findOrganization } from "../db/organizations.ts";
import { findUserContact } from "../db/users.ts";
import { alreadyExists, INVITATION_TTL_MS, invitationMail } from "../invitations.ts";
import { enqueueMail } from "../mail.ts";
import { invitationToProto } from "../mappers.ts";
import { checkActor, checkEmail, checkGrantableRole, checkRequired } from "../validation.ts";

export function createInvitation(ctx: AppContext) {
  return async (req: CreateInvitationRequest): Promise<CreateInvitationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkActor(v, req.actor);
    const email = checkEmail(v, "email", req.email);
    const role = checkGrantableRole(v, "role", req.roleEnum, req.role);
    v.throwIfAny();
    if (!roleWithin(role, actor.role)) throw permissionDenied(`the ${actor.role} role cannot grant the ${role} role`);

    const now = ctx.clock.now();
    const expiresAt = new Date(now.getTime() + INVITATION_TTL_MS);
    const token = newInvitationToken();
    // The console's join page (console/src/pages/auth.tsx), served by the gateway at PUBLIC_BASE_URL.
    const link = `${ctx.publicBaseUrl}/join?token=${token}`;
    try {
      const row = await withTransaction(ctx.pool, async (db) => {
        const org = await findOrganization(db, req.organizationId);
        if (!org) throw notFound("organization");
        const inviter = await findUserContact(db, actor.userId);
        if (!inviter) throw notFound("user");
        if (await emailIsMember(db, req.organizationId, email)) throw alreadyExists(`${email} is already a member of this organization`);
        // An expired invitation no longer blocks a new one; superseded, it leaves the list.
        await expirePending(db, req.organizationId, email, now);
        const invitation = await insertInvitation(db, {
          id: newId("invite"),
          organizationId: req.organizationId,
          email,
          role,
          tokenHash: hashSecret(token),
          invitedBy: actor.userId,
          now,
          expiresAt,
        });
        await enqueueMail(
          db,
          ctx.sealer,
          invitationMail({ to: email, inviter, organization: org.name, role, link, expiresAt }),
          now,
          invitation.id,
        );
        return invitation;
      });
      ctx.mailRelay.nudge();
      ctx.log.info("invitation created", { organization_id: req.organizationId, invitation_id: row.id, role, by: actor.userId });
      return create(CreateInvitationResponseSchema, { invitation: invitationToProto(row, now) });
    } catch (err) {
      if (isUniqueViolation(err, "invitations_one_pending")) {
        throw alreadyExists(`${email} already has a pending invitation to this organization`);
      }
      throw err;
    }
  };
}

export function listInvitations(ctx: AppContext) {
  return async (req: ListInvitationsRequest): Promise<ListInvitationsResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    v.throwIfAny();
    const rows = await listPendingInvitations(ctx.pool, req.organizationId);
    const now = ctx.clock.now();
    return create(ListInvitationsResponseSchema, { invitations: rows.map((r) => invitationToProto(r, now)) });
  };
}

export function cancelInvitation(ctx: AppContext) {
  return async (req: CancelInvitationRequest): Promise<CancelInvitationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    checkRequired(v, "id", req.id);
    v.throwIfAny();
    await withTransaction(ctx.pool, async (db) => {
      if (!(await cancelInvitationRow(db, req.organizationId, req.id, ctx.clock.now()))) throw notFound("invitation");
      await withdrawInvitationMail(db, req.id);
    });
    ctx.log.info("invitation cancelled", { organization_id: req.organizationId, invitation_id: req.id });
    return create(CancelInvitationResponseSchema, {});
  };
}
