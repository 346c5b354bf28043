import type { Schemas } from "../../types.ts";
import { type Args, type Group, optional, outcome, print, say, UsageError } from "../command.ts";
import type { Column } from "../output.ts";

type TrustedSource = Schemas["TrustedSource"];

const COLUMNS: Column<TrustedSource>[] = [
  ["id", (t) => t.id],
  ["cidr", (t) => t.cidr],
  ["description", (t) => t.description],
  ["expires", (t) => t.expires_at ?? "never"],
  ["created", (t) => t.created_at],
];

const databaseId = (args: Args) => args.positionals[0]!;

/** `dbaas databases trusted-sources …`: who may connect to a database. */
export const trustedSources: Group = {
  summary: "Addresses allowed to connect to a database, its pooler and its replicas (none listed: every address)",
  commands: {
    list: {
      summary: "List a database's trusted sources (every page)",
      usage: "<database-id>",
      args: ["database-id"],
      examples: ["dbaas databases trusted-sources list db-abc123", "dbaas databases trusted-sources list db-abc123 -o json"],
      async run(ctx, args) {
        print(ctx, await ctx.client.trustedSources.list(databaseId(args)).all(), COLUMNS);
      },
    },
    add: {
      summary: "Admit an IPv4 or IPv6 address or network; any other address is refused within 5 seconds",
      usage: "<database-id> <cidr> [--description TEXT] [--expires-at TIME]",
      args: ["database-id", "cidr"],
      options: {
        description: { type: "string", value: "TEXT", description: "What it is for (at most 255 characters)" },
        "expires-at": {
          type: "string",
          value: "TIME",
          description: "RFC 3339 time when it stops admitting and leaves the list (default: never)",
        },
      },
      examples: [
        "dbaas databases trusted-sources add db-abc123 203.0.113.0/24 --description office",
        "dbaas databases trusted-sources add db-abc123 198.51.100.7 --expires-at 2026-01-01T12:00:00Z -o json",
      ],
      async run(ctx, args) {
        const description = optional(args, "description");
        const expiresAt = optional(args, "expires-at");
        const added = await ctx.client.trustedSources.add(databaseId(args), {
          cidr: args.positionals[1]!,
          ...(description !== undefined && { description }),
          ...(expiresAt !== undefined && { expires_at: expiresAt }),
        });
        print(ctx, added);
      },
    },
    remove: {
      summary: "Remove a trusted source (its address is refused within 5 seconds unless another entry covers it)",
      usage: "<database-id> <trusted-source-id>",
      args: ["database-id", "trusted-source-id"],
      examples: ["dbaas databases trusted-sources remove db-abc123 ts-def456"],
      async run(ctx, args) {
        await ctx.client.trustedSources.remove(databaseId(args), args.positionals[1]!);
        outcome(ctx, { id: args.positionals[1]!, removed: true }, `Removed ${args.positionals[1]!}.`);
      },
    },
  },
};

/** `dbaas databases pooler …`: the database's PgBouncer. */
export const pooler: Group = {
  summary: "A database's connection pooler (PgBouncer): its host, port, mode and pool size",
  commands: {
    get: {
      summary: "Show the pooler (connection string with the password masked)",
      usage: "<database-id>",
      args: ["database-id"],
      examples: ["dbaas databases pooler get db-abc123", "dbaas databases pooler get db-abc123 -o json"],
      async run(ctx, args) {
        print(ctx, await ctx.client.pooler.get(databaseId(args)));
      },
    },
    update: {
      summary: "Enable or disable the pooler, or change its mode or pool size",
      usage: "<database-id> [--enabled true|false] [--mode transaction|session] [--pool-size N]",
      args: ["database-id"],
      options: {
        enabled: { type: "string", value: "BOOL", description: "true or false" },
        mode: { type: "string", value: "MODE", description: "transaction (default) or session" },
        "pool-size": { type: "string", value: "N", description: "server connections: 1 … the tier's max_connections − 5" },
      },
      examples: [
        "dbaas databases pooler update db-abc123 --mode session",
        "dbaas databases pooler update db-abc123 --pool-size 10 -o json",
      ],
      async run(ctx, args) {
        const enabled = optional(args, "enabled");
        const mode = optional(args, "mode") as Schemas["Pooler"]["mode"] | undefined;
        const size = optional(args, "pool-size");
        if (enabled !== undefined && enabled !== "true" && enabled !== "false") throw new UsageError("--enabled must be true or false");
        if (size !== undefined && !/^[0-9]+$/.test(size)) throw new UsageError("--pool-size must be a whole number");
        const updated = await ctx.client.pooler.update(databaseId(args), {
          ...(enabled !== undefined && { enabled: enabled === "true" }),
          ...(mode !== undefined && { mode }),
          ...(size !== undefined && { pool_size: Number(size) }),
        });
        print(ctx, updated);
        if (!updated.enabled && updated.reason) say(ctx, `\n${updated.reason}`);
      },
    },
  },
};
