import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { newId, notFound, permissionDenied, Validator, withTransaction } from "@dbaas/kit";
import {
  AcceptInvitationResponseSchema,
  CancelInvitationResponseSchema,
  CreateInvitationResponseSchema,
  ListInvitationsResponseSchema,
  type AcceptInvitationRequest,
  type AcceptInvitationResponse,
  type CancelInvitationRequest,
  type CancelInvitationResponse,
  type CreateInvitationRequest,
  type CreateInvitationResponse,
  type ListInvitationsRequest,
  type ListInvitationsResponse,
} from "@dbaas/proto/identity";
import { roleWithin, type RoleName } from "../authz.ts";
import type { AppContext } from "../context.ts";
import { hashSecret, isInvitationToken, newInvitationToken } from "../credentials.ts";
import { isUniqueViolation } from "../db/errors.ts";
import { limitedPasswordCheck } from "../login-attempts.ts";
import { enqueueMail } from "../mail.ts";
import {
  INVITATION_COLUMNS,
  invitationToProto,
  MEMBER_COLUMNS,
  memberToProto,
  ORGANIZATION_COLUMNS,
  organizationToProto,
  type InvitationRow,
  type MemberRow,
  type OrganizationRow,
} from "../mappers.ts";
import { issueSession } from "../sessions.ts";
import { checkActor, checkEmail, checkGivenPassword, checkGrantableRole, checkName, checkPassword, checkRequired } from "../validation.ts";

export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;

const alreadyExists = (message: string) => new ConnectError(message, Code.AlreadyExists);

function invitationMail(opts: {
  to: string;
  inviter: { name: string; email: string };
  organization: string;
  role: RoleName;
  link: string;
  expiresAt: Date;
}) {
  const subject = `${opts.inviter.name} invited you to ${opts.organization}`;
  const text = [
    `${opts.inviter.name} (${opts.inviter.email}) invited you to join the organization "${opts.organization}" as ${opts.role}.`,
    "",
    `Accept the invitation: ${opts.link}`,
    "",
    `The link works once and expires on ${opts.expiresAt.toISOString()}.`,
    "If you did not expect this invitation, ignore this e-mail.",
    "",
  ].join("\n");
  return { to: opts.to, subject, text, link: opts.link };
}

export function createInvitation(ctx: AppContext) {
  return async (req: CreateInvitationRequest): Promise<CreateInvitationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    const actor = checkActor(v, req.actor);
    const email = checkEmail(v, "email", req.email);
    const role = checkGrantableRole(v, "role", req.role);
    v.throwIfAny();
    if (!roleWithin(role, actor.role)) throw permissionDenied(`the ${actor.role} role cannot grant the ${role} role`);

    const now = ctx.clock.now();
    const expiresAt = new Date(now.getTime() + INVITATION_TTL_MS);
    const token = newInvitationToken();
    const link = `${ctx.publicBaseUrl}/invitations/accept?token=${token}`;
    try {
      const row = await withTransaction(ctx.pool, async (db) => {
        const org = await db.query<{ name: string }>("SELECT name FROM organizations WHERE id = $1", [req.organizationId]);
        if (!org.rowCount) throw notFound("organization");
        const inviter = await db.query<{ name: string; email: string }>("SELECT name, email FROM users WHERE id = $1", [
          actor.userId,
        ]);
        if (!inviter.rowCount) throw notFound("user");
        const member = await db.query(
          `SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = $1 AND lower(u.email) = lower($2)`,
          [req.organizationId, email],
        );
        if (member.rowCount) throw alreadyExists(`${email} is already a member of this organization`);
        // An expired invitation no longer blocks a new one; superseded, it leaves the list.
        await db.query(
          `UPDATE invitations SET status = 'expired', finished_at = $3
           WHERE organization_id = $1 AND lower(email) = lower($2) AND status = 'pending' AND expires_at <= $3`,
          [req.organizationId, email, now],
        );
        const inserted = await db.query<InvitationRow>(
          `INSERT INTO invitations (id, organization_id, email, role, status, token_hash, invited_by, created_at, expires_at)
           VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8) RETURNING ${INVITATION_COLUMNS}`,
          [newId("invite"), req.organizationId, email, role, hashSecret(token), actor.userId, now, expiresAt],
        );
        const invitation = inserted.rows[0]!;
        await enqueueMail(
          db,
          ctx.sealer,
          invitationMail({ to: email, inviter: inviter.rows[0]!, organization: org.rows[0]!.name, role, link, expiresAt }),
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
    const result = await ctx.pool.query<InvitationRow>(
      `SELECT ${INVITATION_COLUMNS} FROM invitations
       WHERE organization_id = $1 AND status = 'pending'
       ORDER BY created_at, id`,
      [req.organizationId],
    );
    const now = ctx.clock.now();
    return create(ListInvitationsResponseSchema, { invitations: result.rows.map((r) => invitationToProto(r, now)) });
  };
}

export function cancelInvitation(ctx: AppContext) {
  return async (req: CancelInvitationRequest): Promise<CancelInvitationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    checkRequired(v, "id", req.id);
    v.throwIfAny();
    await withTransaction(ctx.pool, async (db) => {
      const updated = await db.query(
        `UPDATE invitations SET status = 'cancelled', finished_at = $3
         WHERE id = $1 AND organization_id = $2 AND status = 'pending'`,
        [req.id, req.organizationId, ctx.clock.now()],
      );
      if (!updated.rowCount) throw notFound("invitation");
      // Withdraw the mail unless the relay is sending it right now (then the link is dead anyway).
      await db.query(
        `DELETE FROM mail_outbox WHERE id IN (
           SELECT id FROM mail_outbox WHERE invitation_id = $1 AND sent_at IS NULL FOR UPDATE SKIP LOCKED)`,
        [req.id],
      );
    });
    ctx.log.info("invitation cancelled", { organization_id: req.organizationId, invitation_id: req.id });
    return create(CancelInvitationResponseSchema, {});
  };
}

interface InvitationState {
  id: string;
  organization_id: string;
  email: string;
  role: RoleName;
  status: string;
  expires_at: Date;
}

/** Why a token cannot be used (any longer), or nothing when it can. */
function refusal(inv: InvitationState | undefined, now: Date): ConnectError | undefined {
  if (!inv) return notFound("invitation");
  if (inv.status === "cancelled") return new ConnectError("invitation was cancelled", Code.NotFound);
  if (inv.status === "accepted") return alreadyExists("invitation was already accepted");
  if (inv.status === "expired" || inv.expires_at.getTime() <= now.getTime()) {
    return new ConnectError(`invitation expired at ${inv.expires_at.toISOString()}; ask for a new one`, Code.FailedPrecondition);
  }
  return undefined;
}

export function acceptInvitation(ctx: AppContext) {
  return async (req: AcceptInvitationRequest): Promise<AcceptInvitationResponse> => {
    const v = new Validator();
    checkRequired(v, "token", req.token);
    checkGivenPassword(v, "password", req.password);
    v.throwIfAny();
    // Not one of our tokens: no lookup needed to know there is no such invitation.
    if (!isInvitationToken(req.token)) throw notFound("invitation");

    const found = await ctx.pool.query<InvitationState>(
      "SELECT id, organization_id, email, role, status, expires_at FROM invitations WHERE token_hash = $1",
      [hashSecret(req.token)],
    );
    const inv = found.rows[0];
    const refused = refusal(inv, ctx.clock.now());
    if (refused) throw refused;
    const invitation = inv!;

    const existing = await ctx.pool.query<{ id: string; password_hash: string }>(
      "SELECT id, password_hash FROM users WHERE lower(email) = lower($1)",
      [invitation.email],
    );
    const account = existing.rows[0];
    let newUser: { name: string; passwordHash: string } | undefined;
    if (account) {
      const ok = await limitedPasswordCheck(ctx, invitation.email, async () => {
        return (await ctx.passwords.verify(req.password, account.password_hash)).ok;
      });
      if (!ok) {
        throw new ConnectError(
          `${invitation.email} already has an account: password must be that account's password`,
          Code.Unauthenticated,
        );
      }
    } else {
      const nv = new Validator();
      const name = checkName(nv, "name", req.name);
      checkPassword(nv, "password", req.password);
      nv.throwIfAny();
      newUser = { name, passwordHash: await ctx.passwords.hash(req.password) };
    }

    try {
      return await withTransaction(ctx.pool, async (db) => {
        const now = ctx.clock.now();
        const locked = await db.query<InvitationState>(
          "SELECT id, organization_id, email, role, status, expires_at FROM invitations WHERE id = $1 FOR UPDATE",
          [invitation.id],
        );
        const again = refusal(locked.rows[0], now);
        if (again) throw again;

        let userId = account?.id;
        if (!userId) {
          userId = newId("user");
          await db.query(
            "INSERT INTO users (id, email, name, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)",
            [userId, invitation.email, newUser!.name, newUser!.passwordHash, now],
          );
        }
        const membershipId = newId("member");
        const joined = await db.query(
          `INSERT INTO memberships (id, organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (organization_id, user_id) DO NOTHING`,
          [membershipId, invitation.organization_id, userId, invitation.role, now],
        );
        if (!joined.rowCount) throw alreadyExists("you are already a member of this organization");
        await db.query("UPDATE invitations SET status = 'accepted', accepted_by = $2, finished_at = $3 WHERE id = $1", [
          invitation.id,
          userId,
          now,
        ]);
        const member = await db.query<MemberRow>(
          `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.id = $1`,
          [membershipId],
        );
        const org = await db.query<OrganizationRow>(`SELECT ${ORGANIZATION_COLUMNS} FROM organizations WHERE id = $1`, [
          invitation.organization_id,
        ]);
        const token = await issueSession(db, membershipId, now, ctx.tokenTtlSeconds);
        ctx.log.info("invitation accepted", {
          organization_id: invitation.organization_id,
          invitation_id: invitation.id,
          user_id: userId,
          new_user: account === undefined,
        });
        return create(AcceptInvitationResponseSchema, {
          organization: organizationToProto(org.rows[0]!),
          member: memberToProto(member.rows[0]!),
          token,
        });
      });
    } catch (err) {
      if (isUniqueViolation(err, "users_email_key")) {
        throw alreadyExists(`an account for ${invitation.email} was created meanwhile; accept again with its password`);
      }
      throw err;
    }
  };
}
