import { need, optional, outcome, print, say, WAIT } from "../command.js";
import { progress } from "../output.js";
import { psql } from "../psql.js";
import { pooler, trustedSources } from "./edge.js";
import { config, dbs, extensions, logs, queries, roles } from "./inside.js";
export const DATABASE_COLUMNS = [
    ["id", (d) => d.id],
    ["name", (d) => d.name],
    ["status", (d) => d.status],
    ["region", (d) => d.region],
    ["tier", (d) => d.tier],
    ["version", (d) => d.version],
    ["created", (d) => d.created_at],
];
/** --wait: polls until `status`, with a spinner on a terminal and plain lines otherwise (on stderr). */
export async function waitFor(ctx, id, status) {
    const p = progress(ctx.stderr);
    try {
        const db = await ctx.client.databases.waitForStatus(id, status, { onStatus: (s) => p.update(`${id}: ${s}`) });
        p.done(`${id} is ${status}`);
        return db;
    }
    catch (err) {
        p.fail();
        throw err;
    }
}
const id = (args) => args.positionals[0];
/** start, stop and restart: the same shape, a different target status. */
function lifecycle(action, target, summary) {
    return {
        summary,
        usage: "<database-id> [--wait]",
        args: ["database-id"],
        options: { wait: WAIT },
        examples: [`dbaas databases ${action} db-abc123 --wait`],
        async run(ctx, args) {
            const res = await ctx.client.databases[action](id(args));
            if (args.values.wait)
                print(ctx, await waitFor(ctx, res.id, target));
            else
                print(ctx, res);
        },
    };
}
export const databases = {
    summary: "Create, inspect, change and connect to databases",
    commands: {
        list: {
            summary: "List the organization's databases (every page)",
            usage: "[--status STATUS] [--region REGION]",
            options: {
                status: { type: "string", value: "STATUS", description: "Only databases in this status (running, stopped, …)" },
                region: { type: "string", value: "REGION", description: "Only databases in this region (fsn1, nbg1, hel1)" },
            },
            examples: ["dbaas databases list", "dbaas databases list --status running -o json"],
            async run(ctx, args) {
                const status = optional(args, "status");
                const region = optional(args, "region");
                print(ctx, await ctx.client.databases.list({ status, region }).all(), DATABASE_COLUMNS);
            },
        },
        create: {
            summary: "Create a database; its password is shown this once",
            usage: "--name NAME --region REGION --tier TIER [--version VERSION] [--standbys N [--synchronous]] [--wait]",
            options: {
                name: { type: "string", value: "NAME", description: "3-63 characters, unique in the organization" },
                region: { type: "string", value: "REGION", description: "fsn1, nbg1 or hel1" },
                tier: { type: "string", value: "TIER", description: "micro, small, medium, large or xlarge" },
                version: { type: "string", value: "VERSION", description: "PostgreSQL major version (default: the newest)" },
                standbys: { type: "string", value: "N", description: "Standbys on other hosts of the region: 0 (default), 1 or 2" },
                synchronous: { type: "boolean", description: "Commit only once a standby has the WAL (needs --standbys)" },
                wait: { type: "boolean", description: "Wait until it is running, showing progress" },
            },
            examples: [
                "dbaas databases create --name orders --region fsn1 --tier micro --wait",
                "dbaas databases create --name orders --region fsn1 --tier small --standbys 1 --synchronous",
            ],
            async run(ctx, args) {
                const version = optional(args, "version");
                const created = await ctx.client.databases.create({
                    name: need(args, "name"),
                    region: need(args, "region"),
                    tier: need(args, "tier"),
                    ...(version && { version: version }),
                    ...(optional(args, "standbys") !== undefined && { standbys: Number(optional(args, "standbys")) }),
                    ...(args.values.synchronous === true && { synchronous: true }),
                });
                const status = args.values.wait ? (await waitFor(ctx, created.id, "running")).status : created.status;
                print(ctx, { ...created, status });
                say(ctx, "\nThe password is shown this once: keep it (or 'dbaas databases reset-password' later).");
            },
        },
        get: {
            summary: "Show a database (its connection string's password masked)",
            usage: "<database-id>",
            args: ["database-id"],
            examples: ["dbaas databases get db-abc123", "dbaas databases get db-abc123 -o json"],
            async run(ctx, args) {
                print(ctx, await ctx.client.databases.get(id(args)));
            },
        },
        rename: {
            summary: "Rename a database",
            usage: "<database-id> <new-name>",
            args: ["database-id", "new-name"],
            examples: ["dbaas databases rename db-abc123 orders-eu"],
            async run(ctx, args) {
                print(ctx, await ctx.client.databases.update(id(args), { name: args.positionals[1] }));
            },
        },
        start: lifecycle("start", "running", "Start a stopped database"),
        stop: lifecycle("stop", "stopped", "Stop a running database (compute billing stops)"),
        restart: lifecycle("restart", "running", "Restart a running database"),
        resize: {
            summary: "Move a database to another tier",
            usage: "<database-id> --tier TIER [--wait]",
            args: ["database-id"],
            options: { tier: { type: "string", value: "TIER", description: "The new tier" }, wait: WAIT },
            examples: ["dbaas databases resize db-abc123 --tier small --wait"],
            async run(ctx, args) {
                const res = await ctx.client.databases.resize(id(args), { tier: need(args, "tier") });
                if (args.values.wait)
                    print(ctx, await waitFor(ctx, res.id, "running"));
                else
                    print(ctx, res);
            },
        },
        "reset-password": {
            summary: "Replace the password (shown this once); the old one stops working at once",
            usage: "<database-id>",
            args: ["database-id"],
            examples: [
                "dbaas databases reset-password db-abc123",
                "PGPASSWORD=$(dbaas databases reset-password db-abc123 -o json | jq -r .password)",
            ],
            async run(ctx, args) {
                print(ctx, await ctx.client.databases.resetPassword(id(args)));
            },
        },
        delete: {
            summary: "Delete a database (its data is retained 7 days)",
            usage: "<database-id>",
            args: ["database-id"],
            examples: ["dbaas databases delete db-abc123"],
            async run(ctx, args) {
                await ctx.client.databases.delete(id(args));
                outcome(ctx, { id: id(args), deleted: true }, `Deleted ${id(args)}.`);
            },
        },
        operations: {
            summary: "List the operations run on a database",
            usage: "<database-id>",
            args: ["database-id"],
            examples: ["dbaas databases operations db-abc123"],
            async run(ctx, args) {
                const ops = await ctx.client.databases.listOperations(id(args)).all();
                print(ctx, ops, [
                    ["id", (o) => o.id],
                    ["type", (o) => o.type],
                    ["status", (o) => o.status],
                    ["started", (o) => o.started_at],
                    ["finished", (o) => o.finished_at],
                    // A failover's and a standby replacement's members (the reason is in -o json).
                    ["members", (o) => (o.from === undefined ? "" : `${o.from} → ${o.to ?? "(waiting for a host)"}`)],
                ]);
            },
        },
        ha: {
            summary: "Show a database's high availability, or set its standbys and mode",
            usage: "<database-id> [--standbys 0|1|2 [--synchronous]]",
            args: ["database-id"],
            options: {
                standbys: {
                    type: "string",
                    value: "N",
                    description: "Standbys to keep: 0, 1 or 2, each on another host of the region (billed as compute)",
                },
                synchronous: { type: "boolean", description: "Commit only once a standby has the WAL (no acknowledged commit lost on failover)" },
            },
            examples: ["dbaas databases ha db-abc123", "dbaas databases ha db-abc123 --standbys 1 --synchronous"],
            async run(ctx, args) {
                const standbys = optional(args, "standbys");
                const ha = standbys === undefined
                    ? await ctx.client.databases.getHighAvailability(id(args))
                    : await ctx.client.databases.setHighAvailability(id(args), {
                        standbys: Number(standbys),
                        synchronous: args.values.synchronous === true,
                    });
                if (ctx.output === "json")
                    return print(ctx, ha);
                say(ctx, `standbys: ${ha.standbys}, synchronous: ${ha.synchronous}`);
                const last = ha.last_failover;
                say(ctx, `last failover: ${last ? `${last.at} from ${last.from} to ${last.to}: ${last.reason}` : "none"}\n`);
                print(ctx, ha.members, [
                    ["id", (m) => m.id],
                    ["role", (m) => m.role],
                    ["status", (m) => m.status],
                    ["region", (m) => m.region],
                    ["lag_bytes", (m) => String(m.lag_bytes)],
                ]);
            },
        },
        failover: {
            summary: "Switch over to the healthiest standby (planned; the connection string stays the same)",
            usage: "<database-id> [--wait]",
            args: ["database-id"],
            options: { wait: { type: "boolean", description: "Wait until the standby runs as the primary, showing progress" } },
            examples: ["dbaas databases failover db-abc123 --wait"],
            async run(ctx, args) {
                let op = await ctx.client.databases.failover(id(args));
                if (args.values.wait) {
                    const p = progress(ctx.stderr);
                    try {
                        const deadline = Date.now() + 300_000;
                        while (op.status === "running") {
                            p.update(`${id(args)}: switching over to ${op.to ?? "a standby"}`);
                            if (Date.now() > deadline)
                                throw new Error(`${op.id} still running after 5 minutes`);
                            await new Promise((r) => setTimeout(r, 1000));
                            const ops = await ctx.client.databases.listOperations(id(args), { per_page: 100 });
                            op = ops.items.find((o) => o.id === op.id) ?? op;
                        }
                        if (op.status === "failed")
                            throw new Error(`switchover failed: ${op.error ?? "no reason given"}`);
                        p.done(`${id(args)} runs on ${op.to}`);
                    }
                    catch (err) {
                        p.fail();
                        throw err;
                    }
                }
                print(ctx, op);
            },
        },
        "ca-certificate": {
            summary: "Print the CA certificate (PEM) for sslmode=verify-full",
            usage: "<database-id>",
            args: ["database-id"],
            examples: ["dbaas databases ca-certificate db-abc123 > ca.pem", "dbaas databases ca-certificate db-abc123 -o json"],
            async run(ctx, args) {
                const pem = await ctx.client.databases.getCaCertificate(id(args));
                if (ctx.output === "json")
                    print(ctx, { id: id(args), ca_certificate: pem });
                else
                    ctx.stdout.write(pem);
            },
        },
        psql: {
            summary: "Run psql connected to a database",
            usage: "<database-id> [--password PASSWORD] [--hostaddr ADDRESS] [-- <psql options>]",
            args: ["database-id"],
            rest: true,
            options: {
                password: {
                    type: "string",
                    value: "PASSWORD",
                    description: "The database password (else $PGPASSWORD, else psql asks): the API shows it only at create and reset-password",
                },
                hostaddr: {
                    type: "string",
                    value: "ADDRESS",
                    description: "Connect to this address (default: 127.0.0.1 when a *.localhost host does not resolve)",
                },
            },
            examples: ["dbaas databases psql db-abc123", "PGPASSWORD=… dbaas databases psql db-abc123 -- -c 'SELECT 1'"],
            async run(ctx, args) {
                const db = await ctx.client.databases.get(id(args));
                await psql(ctx, db, {
                    password: optional(args, "password"),
                    hostaddr: optional(args, "hostaddr"),
                    extra: args.positionals.slice(1),
                });
            },
        },
        "trusted-sources": trustedSources,
        pooler,
        roles,
        dbs,
        config,
        extensions,
        logs,
        queries,
    },
};
