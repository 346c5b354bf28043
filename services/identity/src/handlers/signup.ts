import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { newId, Validator, withTransaction } from "@dbaas/kit";
import { SignupResponseSchema, UserSchema, type SignupRequest, type SignupResponse } from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { isUniqueViolation } from "../db/errors.ts";
import { insertMembership } from "../db/memberships.ts";
import { insertOrganization } from "../db/organizations.ts";
import { emailRegistered, insertUser } from "../db/users.ts";
import { organizationToProto } from "../mappers.ts";
import { issueSession } from "../sessions.ts";
import { checkEmail, checkName, checkPassword } from "../validation.ts";

const emailTaken = () => new ConnectError("an account with this e-mail already exists", Code.AlreadyExists);

export function signup(ctx: AppContext) {
  return async (req: SignupRequest): Promise<SignupResponse> => {
    const v = new Validator();
    const email = checkEmail(v, "email", req.email);
    checkPassword(v, "password", req.password);
    const name = checkName(v, "name", req.name);
    const organizationName = checkName(v, "organization_name", req.organizationName);
    v.throwIfAny();

    // Checked before hashing so a duplicate costs no scrypt; the unique index still decides races.
    if (await emailRegistered(ctx.pool, email)) throw emailTaken();
    const passwordHash = await ctx.passwords.hash(req.password);
    const now = ctx.clock.now();

    try {
      return await withTransaction(ctx.pool, async (db) => {
        const userId = newId("user");
        await insertUser(db, { id: userId, email, name, passwordHash, now });
        const org = await insertOrganization(db, { id: newId("org"), name: organizationName, now });
        const membershipId = newId("member");
        await insertMembership(db, { id: membershipId, organizationId: org.id, userId, role: "owner", now });
        const token = await issueSession(db, membershipId, now, ctx.tokenTtlSeconds);
        ctx.log.info("signed up", { user_id: userId, organization_id: org.id });
        return create(SignupResponseSchema, {
          user: create(UserSchema, { id: userId, email, name }),
          organization: organizationToProto(org),
          token,
        });
      });
    } catch (err) {
      if (isUniqueViolation(err, "users_email_key")) throw emailTaken();
      throw err;
    }
  };
}
