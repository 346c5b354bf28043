import { created, ok, type Reply } from "../../middleware/envelope.ts";
import { NAME_MAX_LENGTH, NAME_MIN_LENGTH, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "@dbaas/kit";
import { body, describe, displayText, emailAddress, optional, text, type Infer } from "../../schema.ts";
import { ID } from "../ids.ts";
import { present } from "../mappers.ts";
import { SIGNUP, TOKEN } from "../responses-identity.ts";
import type { Call } from "../route.ts";

/** A password being checked: any the service could have accepted. */
export const password = (description: string) => text(PASSWORD_MAX_LENGTH, description);
/** A password being set. */
const newPassword = (description: string) => text(PASSWORD_MAX_LENGTH, description, PASSWORD_MIN_LENGTH);
/** User, organization and API-key names. */
export const displayName = (description: string) =>
  displayText(NAME_MIN_LENGTH, NAME_MAX_LENGTH, `${description} ${NAME_MIN_LENGTH}–${NAME_MAX_LENGTH} characters after trimming.`);

export const signupBody = body({
  email: emailAddress("E-mail address; becomes the login."),
  password: newPassword("Password of the new user."),
  name: displayName("Display name of the user."),
  organization_name: displayName("Name of the organization created with the user (plan free)."),
});

export const tokenBody = body({
  email: emailAddress("E-mail address of the user."),
  password: password("The user's password."),
  organization_id: optional(describe(ID.organization.schema, "Organization the token acts in; default: the user's oldest membership.")),
});

export async function signup({ ctx, body }: Call<Infer<typeof signupBody>>): Promise<Reply> {
  const res = await ctx.identity.signup({
    email: body.email,
    password: body.password,
    name: body.name,
    organizationName: body.organization_name,
  });
  return created(SIGNUP.map(res));
}

export async function token({ ctx, body }: Call<Infer<typeof tokenBody>>): Promise<Reply> {
  const res = await ctx.identity.createToken({
    email: body.email,
    password: body.password,
    organizationId: body.organization_id ?? "",
  });
  return ok(TOKEN.map(present(res.token, "token")));
}
