import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { newId, Validator, withTransaction } from "@dbaas/kit";
import { SignupResponseSchema, UserSchema, type SignupRequest, type SignupResponse } from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { isUniqueViolation } from "../db/errors.ts";
import { organizationToProto, ORGANIZATION_COLUMNS, type OrganizationRow } from "../mappers.ts";
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
    const existing = await ctx.pool.query("SELECT 1 FROM users WHERE lower(email) = lower($1)", [email]);
    if (existing.rowCount) throw emailTaken();
    const passwordHash = await ctx.passwords.hash(req.password);
    const now = ctx.clock.now();

    try {
      return await withTransaction(ctx.pool, async (db) => {
        const userId = newId("user");
        await db.query(
          "INSERT INTO users (id, email, name, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)",
          [userId, email, name, passwordHash, now],
        );
        const org = await db.query<OrganizationRow>(
          `INSERT INTO organizations (id, name, plan, created_at, updated_at) VALUES ($1, $2, 'free', $3, $3)
           RETURNING ${ORGANIZATION_COLUMNS}`,
          [newId("org"), organizationName, now],
        );
        const membershipId = newId("member");
        await db.query(
          "INSERT INTO memberships (id, organization_id, user_id, role, created_at) VALUES ($1, $2, $3, 'owner', $4)",
          [membershipId, org.rows[0]!.id, userId, now],
        );
        const token = await issueSession(db, membershipId, now, ctx.tokenTtlSeconds);
        ctx.log.info("signed up", { user_id: userId, organization_id: org.rows[0]!.id });
        return create(SignupResponseSchema, {
          user: create(UserSchema, { id: userId, email, name }),
          organization: organizationToProto(org.rows[0]!),
          token,
        });
      });
    } catch (err) {
      if (isUniqueViolation(err, "users_email_key")) throw emailTaken();
      throw err;
    }
  };
}
