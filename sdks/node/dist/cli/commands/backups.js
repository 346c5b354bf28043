import { setTimeout as sleep } from "node:timers/promises";
import { CliError, need, optional, print, say, WAIT } from "../command.js";
import { progress } from "../output.js";
import { waitFor } from "./databases.js";
/** --wait of `backups create`: polls the newest page of backups until this one completed or failed. */
async function waitBackup(ctx, databaseId, backupId) {
    const p = progress(ctx.stderr);
    const deadline = Date.now() + 600_000;
    for (;;) {
        const page = await ctx.client.backups.list(databaseId);
        const backup = page.items.find((b) => b.id === backupId);
        if (backup)
            p.update(`${backupId}: ${backup.status}`);
        if (backup?.status === "completed") {
            p.done(`${backupId} completed (${backup.size_bytes} bytes)`);
            return backup;
        }
        if (backup?.status === "failed" || Date.now() > deadline) {
            p.fail();
            throw new CliError(`${backupId} ${backup?.status === "failed" ? `failed: ${backup.failure_reason}` : "did not complete in 10 minutes"}`);
        }
        await sleep(2000);
    }
}
export const backups = {
    summary: "Base backups of a database",
    commands: {
        list: {
            summary: "List a database's base backups (newest first) and its restore window",
            usage: "<database-id>",
            args: ["database-id"],
            examples: ["dbaas backups list db-abc123", "dbaas backups list db-abc123 -o json"],
            async run(ctx, args) {
                const first = await ctx.client.backups.list(args.positionals[0]);
                const { items, meta, ...window } = first;
                const all = meta.total_pages > 1 ? [...items, ...(await ctx.client.backups.list(args.positionals[0], { page: 2 }).all())] : items;
                if (ctx.output === "json")
                    return print(ctx, { ...window, backups: all });
                print(ctx, all, [
                    ["id", (b) => b.id],
                    ["type", (b) => b.type],
                    ["status", (b) => b.status],
                    ["started", (b) => b.started_at],
                    ["completed", (b) => b.completed_at],
                    ["size", (b) => b.size_bytes],
                ]);
                say(ctx, `\nRestorable from ${window.earliest_restore_time ?? "-"} to ${window.latest_restore_time ?? "-"}.`);
            },
        },
        create: {
            summary: "Take a base backup now",
            usage: "<database-id> [--wait]",
            args: ["database-id"],
            options: { wait: { type: "boolean", description: "Wait until the backup completed, showing progress" } },
            examples: ["dbaas backups create db-abc123 --wait"],
            async run(ctx, args) {
                const backup = await ctx.client.backups.create(args.positionals[0]);
                print(ctx, args.values.wait ? await waitBackup(ctx, args.positionals[0], backup.id) : backup);
            },
        },
    },
};
export const restore = {
    summary: "Restore a database to a point in time as a NEW database (its password shown this once)",
    usage: "<database-id> --name NAME [--time RFC3339] [--tier TIER] [--region REGION] [--wait]",
    args: ["database-id"],
    options: {
        name: { type: "string", value: "NAME", description: "Name of the new database" },
        time: { type: "string", value: "TIME", description: "Instant to restore to, e.g. 2026-01-01T12:00:00Z (default: the latest)" },
        tier: { type: "string", value: "TIER", description: "Tier of the new database (default: the source's)" },
        region: { type: "string", value: "REGION", description: "Region of the new database (default: the source's)" },
        wait: { ...WAIT, description: "Wait until the new database is running" },
    },
    examples: [
        "dbaas restore db-abc123 --name orders-before-the-bug --time 2026-01-01T12:00:00Z --wait",
        "dbaas backups list db-abc123   # the restore window",
    ],
    async run(ctx, args) {
        const time = optional(args, "time");
        const tier = optional(args, "tier");
        const region = optional(args, "region");
        const restored = await ctx.client.backups.restore(args.positionals[0], {
            name: need(args, "name"),
            ...(time && { restore_time: time }),
            ...(tier && { tier: tier }),
            ...(region && { region: region }),
        });
        const status = args.values.wait ? (await waitFor(ctx, restored.id, "running")).status : restored.status;
        print(ctx, { ...restored, status });
    },
};
