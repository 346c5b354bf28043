import { need, optional, outcome, print, say } from "../command.js";
export const members = {
    summary: "Members of the organization and invitations",
    commands: {
        list: {
            summary: "List the organization's members",
            usage: "",
            examples: ["dbaas members list"],
            async run(ctx) {
                print(ctx, await ctx.client.organization.listMembers().all(), [
                    ["id", (m) => m.id],
                    ["email", (m) => m.user.email],
                    ["name", (m) => m.user.name],
                    ["role", (m) => m.role],
                    ["joined", (m) => m.joined_at],
                ]);
            },
        },
        invite: {
            summary: "Invite someone by e-mail (the invitation is valid 7 days)",
            usage: "--email EMAIL --role ROLE",
            options: {
                email: { type: "string", value: "EMAIL", description: "Address the invitation is mailed to" },
                role: { type: "string", value: "ROLE", description: "admin, developer or viewer" },
            },
            examples: ["dbaas members invite --email grace@example.com --role developer"],
            async run(ctx, args) {
                print(ctx, await ctx.client.organization.inviteMember({ email: need(args, "email"), role: need(args, "role") }));
            },
        },
        "set-role": {
            summary: "Change a member's role",
            usage: "<member-id> --role ROLE",
            args: ["member-id"],
            options: { role: { type: "string", value: "ROLE", description: "admin, developer or viewer" } },
            examples: ["dbaas members set-role member-abc123 --role admin"],
            async run(ctx, args) {
                print(ctx, await ctx.client.organization.updateMember(args.positionals[0], { role: need(args, "role") }));
            },
        },
        remove: {
            summary: "Remove a member (their sessions end at once)",
            usage: "<member-id>",
            args: ["member-id"],
            examples: ["dbaas members remove member-abc123"],
            async run(ctx, args) {
                await ctx.client.organization.removeMember(args.positionals[0]);
                outcome(ctx, { id: args.positionals[0], removed: true }, `Removed ${args.positionals[0]}.`);
            },
        },
        invitations: {
            summary: "List pending (or expired) invitations",
            usage: "",
            examples: ["dbaas members invitations"],
            async run(ctx) {
                print(ctx, await ctx.client.organization.listInvitations().all(), [
                    ["id", (i) => i.id],
                    ["email", (i) => i.email],
                    ["role", (i) => i.role],
                    ["status", (i) => i.status],
                    ["expires", (i) => i.expires_at],
                ]);
            },
        },
        "cancel-invitation": {
            summary: "Cancel an invitation; its link stops working",
            usage: "<invitation-id>",
            args: ["invitation-id"],
            examples: ["dbaas members cancel-invitation invite-abc123"],
            async run(ctx, args) {
                await ctx.client.organization.cancelInvitation(args.positionals[0]);
                outcome(ctx, { id: args.positionals[0], cancelled: true }, `Cancelled ${args.positionals[0]}.`);
            },
        },
    },
};
export const apiKeys = {
    summary: "API keys: credentials for scripts and CI that outlive a login",
    commands: {
        list: {
            summary: "List API keys (never their secrets)",
            usage: "",
            examples: ["dbaas api-keys list"],
            async run(ctx) {
                print(ctx, await ctx.client.apiKeys.list().all(), [
                    ["id", (k) => k.id],
                    ["name", (k) => k.name],
                    ["prefix", (k) => k.prefix],
                    ["scopes", (k) => k.scopes.join(",")],
                    ["expires", (k) => k.expires_at ?? "never"],
                ]);
            },
        },
        create: {
            summary: "Create an API key; its secret is shown this once",
            usage: "--name NAME [--scope SCOPE]... [--expires-at RFC3339]",
            options: {
                name: { type: "string", value: "NAME", description: "What the key is for" },
                scope: { type: "string", value: "SCOPE", multiple: true, description: "e.g. databases:read (default: every scope you hold)" },
                "expires-at": { type: "string", value: "TIME", description: "When it stops working (default: never)" },
            },
            examples: [
                "dbaas api-keys create --name ci --scope databases:read --scope databases:write",
                "DBAAS_TOKEN=dbk_… dbaas databases list",
            ],
            async run(ctx, args) {
                const scopes = args.values.scope;
                const expires = optional(args, "expires-at");
                print(ctx, await ctx.client.apiKeys.create({ name: need(args, "name"), ...(scopes && { scopes }), ...(expires && { expires_at: expires }) }));
                say(ctx, "\nThe secret is shown this once: use it as DBAAS_TOKEN.");
            },
        },
        revoke: {
            summary: "Revoke an API key at once",
            usage: "<key-id>",
            args: ["key-id"],
            examples: ["dbaas api-keys revoke key-abc123"],
            async run(ctx, args) {
                await ctx.client.apiKeys.revoke(args.positionals[0]);
                outcome(ctx, { id: args.positionals[0], revoked: true }, `Revoked ${args.positionals[0]}.`);
            },
        },
    },
};
