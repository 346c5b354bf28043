import { spawn } from "node:child_process";
import { lookup } from "node:dns/promises";
import { CliError } from "./command.js";
/** psql's conninfo words: values quoted as libpq wants them. */
const word = (k, v) => `${k}='${String(v).replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
/**
 * `*.localhost` names are loopback by definition (RFC 6761) but not every
 * resolver knows it: then psql gets `hostaddr=127.0.0.1` and keeps the name
 * for TLS. Other names are left to psql.
 */
async function hostaddrFor(host) {
    try {
        await lookup(host);
        return undefined;
    }
    catch {
        return host === "localhost" || host.endsWith(".localhost") ? "127.0.0.1" : undefined;
    }
}
/**
 * Runs psql on `db` in this terminal and exits with its status. The
 * password is not retrievable from the API after create/reset-password: it
 * comes from --password or PGPASSWORD, else psql asks for it.
 */
export async function psql(ctx, db, opts) {
    const hostaddr = opts.hostaddr ?? (await hostaddrFor(db.host));
    const conninfo = [
        word("host", db.host),
        ...(hostaddr ? [word("hostaddr", hostaddr)] : []),
        word("port", db.port),
        word("dbname", db.database),
        word("user", db.username),
        word("sslmode", "require"),
    ].join(" ");
    const env = { ...ctx.env, ...(opts.password !== undefined && { PGPASSWORD: opts.password }) };
    const child = spawn("psql", [conninfo, ...opts.extra], { stdio: "inherit", env });
    // Ctrl-C belongs to psql (it cancels the running query), not to us.
    const ignore = () => { };
    process.on("SIGINT", ignore);
    try {
        const code = await new Promise((resolve, reject) => {
            child.once("error", (err) => reject(err.code === "ENOENT" ? new CliError("psql not found: install the PostgreSQL client (apt-get install postgresql-client)") : err));
            child.once("exit", (c, signal) => resolve(c ?? (signal ? 128 : 1)));
        });
        process.exitCode = code;
    }
    finally {
        process.off("SIGINT", ignore);
    }
}
