import { created, ok, type Reply } from "../../middleware/envelope.ts";
import { optional, required, type Infer } from "../../schema.ts";
import { iso, organization, present } from "../mappers.ts";
import type { Call } from "../route.ts";
import type { Token } from "@dbaas/proto/identity";

export const signupBody = {
  email: required("string", "E-mail address; becomes the login."),
  password: required("string", "Password of the new user."),
  name: required("string", "Display name of the user."),
  organization_name: required("string", "Name of the organization created with the user (plan free)."),
};

export const tokenBody = {
  email: required("string", "E-mail address of the user."),
  password: required("string", "The user's password."),
  organization_id: optional("string", "Organization the token acts in; default: the user's oldest membership."),
};

function tokenJson(token: Token) {
  return { access_token: token.accessToken, token_type: token.tokenType, expires_at: iso(token.expiresAt) };
}

export async function signup({ ctx, body }: Call<Infer<typeof signupBody>>): Promise<Reply> {
  const res = await ctx.identity.signup({
    email: body.email,
    password: body.password,
    name: body.name,
    organizationName: body.organization_name,
  });
  const user = present(res.user, "user");
  const org = present(res.organization, "organization");
  return created({
    user: { id: user.id, email: user.email, name: user.name },
    organization: organization(org),
    ...tokenJson(present(res.token, "token")),
  });
}

export async function token({ ctx, body }: Call<Infer<typeof tokenBody>>): Promise<Reply> {
  const res = await ctx.identity.createToken({
    email: body.email,
    password: body.password,
    organizationId: body.organization_id ?? "",
  });
  return ok(tokenJson(present(res.token, "token")));
}
