import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { newId, notFound, Validator, withTransaction } from "@dbaas/kit";
import { AcceptInvitationResponseSchema, type AcceptInvitationRequest, type AcceptInvitationResponse } from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { hashSecret, isInvitationToken } from "../credentials.ts";
import { isUniqueViolation } from "../db/errors.ts";
import { findInvitationByToken, lockInvitation, markAccepted } from "../db/invitations.ts";
import { findMember, joinOrganization } from "../db/memberships.ts";
import { findOrganization } from "../db/organizations.ts";
import { findAccount, insertUser } from "../db/users.ts";
import { alreadyExists, refusal } from "../invitations.ts";
import { limitedPasswordCheck } from "../login-attempts.ts";
import { memberToProto, organizationToProto } from "../mappers.ts";
import { issueSession } from "../sessions.ts";
import { checkGivenPassword, checkName, checkPassword, checkRequired } from "../validation.ts";

/**
 * Joins the invitation's organization with its one-time token: as the
 * existing account of the invited address (its password required), or as a
 * new user (name and password required). Logs the user in there.
 */
export function acceptInvitation(ctx: AppContext) {
  return async (req: AcceptInvitationRequest): Promise<AcceptInvitationResponse> => {
    const v = new Validator();
    checkRequired(v, "token", req.token);
    checkGivenPassword(v, "password", req.password);
    v.throwIfAny();
    // Not one of our tokens: no lookup needed to know there is no such invitation.
    if (!isInvitationToken(req.token)) throw notFound("invitation");

    const found = await findInvitationByToken(ctx.pool, hashSecret(req.token));
    const refused = refusal(found, ctx.clock.now());
    if (refused) throw refused;
    const invitation = found!;

    const account = await findAccount(ctx.pool, invitation.email);
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
        const again = refusal(await lockInvitation(db, invitation.id), now);
        if (again) throw again;

        let userId = account?.id;
        if (!userId) {
          userId = newId("user");
          await insertUser(db, { id: userId, email: invitation.email, name: newUser!.name, passwordHash: newUser!.passwordHash, now });
        }
        const membershipId = newId("member");
        const joined = await joinOrganization(db, {
          id: membershipId,
          organizationId: invitation.organization_id,
          userId,
          role: invitation.role,
          now,
        });
        if (!joined) throw alreadyExists("you are already a member of this organization");
        await markAccepted(db, invitation.id, userId, now);
        const member = await findMember(db, membershipId);
        const org = await findOrganization(db, invitation.organization_id);
        const token = await issueSession(db, membershipId, now, ctx.tokenTtlSeconds);
        ctx.log.info("invitation accepted", {
          organization_id: invitation.organization_id,
          invitation_id: invitation.id,
          user_id: userId,
          new_user: account === undefined,
        });
        return create(AcceptInvitationResponseSchema, {
          organization: organizationToProto(org!),
          member: memberToProto(member!),
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
