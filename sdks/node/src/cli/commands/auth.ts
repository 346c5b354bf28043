import { removeConfigToken, writeConfig } from "../config.ts";
import { CliError, type Args, type Context, type Group, need, optional, outcome, print, say } from "../command.ts";
import { promptHidden, promptLine } from "../prompt.ts";

const PASSWORD = {
  type: "string",
  value: "PASSWORD",
  description: "The password (else $DBAAS_PASSWORD, else asked without echo)",
} as const;

async function password(ctx: Context, args: Args, question = "Password: "): Promise<string> {
  return optional(args, "password") ?? ctx.env.DBAAS_PASSWORD ?? (await promptHidden(question, process.stdin, ctx.stderr));
}

async function remember(ctx: Context, login: { access_token: string; expires_at: string }, email: string): Promise<void> {
  await writeConfig(ctx.configPath, {
    ...ctx.config,
    url: ctx.client.baseUrl,
    token: login.access_token,
    expires_at: login.expires_at,
    email,
  });
}

export const auth: Group = {
  summary: "Sign up, log in and out, print the token",
  commands: {
    signup: {
      summary: "Create a user and an organization (plan free), and log in as that user",
      usage: "--email EMAIL --name NAME --organization NAME [--password PASSWORD]",
      options: {
        email: { type: "string", value: "EMAIL", description: "E-mail address; becomes the login" },
        name: { type: "string", value: "NAME", description: "Your display name" },
        organization: { type: "string", value: "NAME", description: "Name of the new organization" },
        password: PASSWORD,
      },
      examples: [
        "dbaas auth signup --email ada@example.com --name Ada --organization Acme",
        "DBAAS_PASSWORD=… dbaas auth signup --email ada@example.com --name Ada --organization Acme -o json",
      ],
      async run(ctx, args) {
        const email = need(args, "email");
        const name = need(args, "name");
        const organization = need(args, "organization");
        const signup = await ctx.client.auth.signup({ email, name, organization_name: organization, password: await password(ctx, args) });
        await remember(ctx, signup, email);
        if (ctx.output === "json") print(ctx, signup);
        else
          say(
            ctx,
            `Signed up as ${signup.user.email} in ${signup.organization.name} (${signup.organization.id}); logged in until ${signup.expires_at}.`,
          );
      },
    },
    login: {
      summary: "Log in with e-mail and password; the token is kept in the config file (mode 0600)",
      usage: "[--email EMAIL] [--password PASSWORD] [--organization-id ID]",
      options: {
        email: { type: "string", value: "EMAIL", description: "Your e-mail address (asked when missing)" },
        password: PASSWORD,
        "organization-id": { type: "string", value: "ID", description: "Organization to act in (default: your oldest membership)" },
      },
      examples: ["dbaas auth login --email ada@example.com", "DBAAS_PASSWORD=… dbaas auth login --email ada@example.com"],
      async run(ctx, args) {
        const email = optional(args, "email") ?? (await promptLine("E-mail: ", process.stdin, ctx.stderr));
        const org = optional(args, "organization-id");
        const token = await ctx.client.auth.login({ email, password: await password(ctx, args), ...(org && { organization_id: org }) });
        await remember(ctx, token, email);
        if (ctx.output === "json") print(ctx, token);
        else say(ctx, `Logged in as ${email} until ${token.expires_at}.`);
      },
    },
    logout: {
      summary: "Forget the token kept in the config file",
      usage: "",
      examples: ["dbaas auth logout"],
      async run(ctx) {
        const had = await removeConfigToken(ctx.configPath);
        outcome(ctx, { logged_out: had }, had ? "Logged out." : "Not logged in.");
      },
    },
    token: {
      summary: "Print the token in use ($DBAAS_TOKEN, else the config file's)",
      usage: "",
      examples: ["dbaas auth token", 'curl -H "authorization: Bearer $(dbaas auth token)" http://127.0.0.1:8080/v1/databases'],
      async run(ctx) {
        const token = ctx.env.DBAAS_TOKEN || ctx.config.token;
        if (!token) throw new CliError("not logged in: run 'dbaas auth login' or set DBAAS_TOKEN");
        const source = ctx.env.DBAAS_TOKEN ? "DBAAS_TOKEN" : "config";
        if (ctx.output === "json") print(ctx, { token, source, ...(source === "config" && { expires_at: ctx.config.expires_at }) });
        else ctx.stdout.write(`${token}\n`);
      },
    },
  },
};
