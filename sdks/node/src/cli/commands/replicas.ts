import type { ReplicaStatus, Schemas } from "../../types.ts";
import { type Args, type Context, type Group, need, optional, outcome, print, say, WAIT } from "../command.ts";
import { type Column, progress } from "../output.ts";
import { waitFor } from "./databases.ts";

type Replica = Schemas["Replica"];

const COLUMNS: Column<Replica>[] = [
  ["id", (r) => r.id],
  ["name", (r) => r.name],
  ["status", (r) => r.status],
  ["region", (r) => r.region],
  ["tier", (r) => r.tier],
  ["lag_bytes", (r) => r.lag_bytes],
  ["host", (r) => r.host],
  ["created", (r) => r.created_at],
];

/** --wait of `replicas create`: polls until `status`, with a spinner on a terminal and plain lines otherwise. */
async function waitReplica(ctx: Context, databaseId: string, replicaId: string, status: ReplicaStatus): Promise<Replica> {
  const p = progress(ctx.stderr);
  try {
    const replica = await ctx.client.replicas.waitForStatus(databaseId, replicaId, status, {
      onStatus: (s) => p.update(`${replicaId}: ${s}`),
    });
    p.done(`${replicaId} is ${status}`);
    return replica;
  } catch (err) {
    p.fail();
    throw err;
  }
}

const databaseId = (args: Args) => args.positionals[0]!;
const replicaId = (args: Args) => args.positionals[1]!;

export const replicas: Group = {
  summary: "Read replicas of a database: hot standbys that follow it, promotable to a database",
  commands: {
    list: {
      summary: "List a database's read replicas (every page) with their replication lag",
      usage: "<database-id>",
      args: ["database-id"],
      examples: ["dbaas replicas list db-abc123", "dbaas replicas list db-abc123 -o json"],
      async run(ctx, args) {
        print(ctx, await ctx.client.replicas.list(databaseId(args)).all(), COLUMNS);
      },
    },
    create: {
      summary: "Create a read replica of a running database (at most 5; needs a payment method)",
      usage: "<database-id> --name NAME [--tier TIER] [--region REGION] [--wait]",
      args: ["database-id"],
      options: {
        name: { type: "string", value: "NAME", description: "3-63 characters, unique among the database's replicas" },
        tier: { type: "string", value: "TIER", description: "micro, small, medium, large or xlarge (default: the database's)" },
        region: { type: "string", value: "REGION", description: "fsn1, nbg1 or hel1 (default: the database's)" },
        wait: { type: "boolean", description: "Wait until it is running (streaming from the database), showing progress" },
      },
      examples: [
        "dbaas replicas create db-abc123 --name reports --wait",
        "dbaas replicas create db-abc123 --name reports-hel --region hel1 --tier small -o json",
      ],
      async run(ctx, args) {
        const tier = optional(args, "tier") as Replica["tier"] | undefined;
        const region = optional(args, "region") as Replica["region"] | undefined;
        const created = await ctx.client.replicas.create(databaseId(args), {
          name: need(args, "name"),
          ...(tier && { tier }),
          ...(region && { region }),
        });
        print(ctx, args.values.wait ? await waitReplica(ctx, databaseId(args), created.id, "running") : created);
        say(ctx, "\nConnect with the database's own username and password; the replica is read-only.");
      },
    },
    get: {
      summary: "Show a read replica (connection string with the password masked)",
      usage: "<database-id> <replica-id>",
      args: ["database-id", "replica-id"],
      examples: ["dbaas replicas get db-abc123 rep-def456", "dbaas replicas get db-abc123 rep-def456 -o json"],
      async run(ctx, args) {
        print(ctx, await ctx.client.replicas.get(databaseId(args), replicaId(args)));
      },
    },
    delete: {
      summary: "Delete a read replica (its data goes at once)",
      usage: "<database-id> <replica-id>",
      args: ["database-id", "replica-id"],
      examples: ["dbaas replicas delete db-abc123 rep-def456"],
      async run(ctx, args) {
        await ctx.client.replicas.delete(databaseId(args), replicaId(args));
        outcome(ctx, { id: replicaId(args), deleted: true }, `Deleted ${replicaId(args)}.`);
      },
    },
    promote: {
      summary: "Promote a running replica to an independent, writable database (the replica is gone)",
      usage: "<database-id> <replica-id> [--wait]",
      args: ["database-id", "replica-id"],
      options: { wait: { ...WAIT, description: "Wait until the new database is running, showing progress" } },
      examples: ["dbaas replicas promote db-abc123 rep-def456 --wait", "dbaas replicas promote db-abc123 rep-def456 -o json"],
      async run(ctx, args) {
        const db = await ctx.client.replicas.promote(databaseId(args), replicaId(args));
        print(ctx, args.values.wait ? await waitFor(ctx, db.id, "running") : db);
        say(ctx, `\n${replicaId(args)} is now the database ${db.id}; it keeps the password of ${databaseId(args)}.`);
      },
    },
  },
};
