import { data, none, paged, Resource, seg } from "./base.js";
const under = (databaseId, what, name) => `/v1/databases/${seg(databaseId)}/${what}${name === undefined ? "" : `/${seg(name)}`}`;
/**
 * A database's roles: `client.roles`. Read from and changed on the running
 * server; a role made here is a LOGIN role, never superuser, and its
 * password is shown once (in `create` and `resetPassword`).
 */
export class Roles extends Resource {
    /** The database's roles by name, dbadmin included: `await` for a page, `for await` for all of them. */
    list(databaseId, query, opts) {
        return paged(this, under(databaseId, "roles"), "roles", query, opts);
    }
    /** Creates a role with a generated password (in the answer, shown this once). At most 50 per database. */
    create(databaseId, body, opts) {
        return data(this, "POST", under(databaseId, "roles"), body, opts);
    }
    /** Drops a role and ends its sessions (409 while it owns objects; dbadmin cannot go). */
    delete(databaseId, name, opts) {
        return none(this, "DELETE", under(databaseId, "roles", name), opts);
    }
    /** A new password for the role; the old one and its sessions end before the answer arrives. */
    resetPassword(databaseId, name, opts) {
        return data(this, "POST", `${under(databaseId, "roles", name)}/reset-password`, undefined, opts);
    }
}
/** A database's logical databases (the server's, defaultdb included): `client.dbs`. */
export class Dbs extends Resource {
    list(databaseId, query, opts) {
        return paged(this, under(databaseId, "dbs"), "dbs", query, opts);
    }
    /** Creates a logical database owned by `owner` (default dbadmin). */
    create(databaseId, body, opts) {
        return data(this, "POST", under(databaseId, "dbs"), body, opts);
    }
    /** Drops a logical database (409 for defaultdb, or while it has connections). */
    delete(databaseId, name, opts) {
        return none(this, "DELETE", under(databaseId, "dbs", name), opts);
    }
}
/**
 * A database's configuration: `client.config`. `update` is all or nothing; on a running database it
 * answers once the server has the change (restart-only parameters show `pending_restart`).
 */
export class Config extends Resource {
    get(databaseId, opts) {
        return data(this, "GET", under(databaseId, "config"), undefined, opts);
    }
    /** `{ parameters: { work_mem: "64MB", jit: false, statement_timeout: null } }` (null: back to the default). */
    update(databaseId, body, opts) {
        return data(this, "PATCH", under(databaseId, "config"), body, opts);
    }
}
/** Extensions of a database's server: `client.extensions`. `db` names the logical database (default defaultdb). */
export class Extensions extends Resource {
    /** What the server's binaries offer, installed or not in `db`, and whether each can be installed (`allowed`). */
    list(databaseId, query, opts) {
        return paged(this, under(databaseId, "extensions"), "extensions", query, opts);
    }
    /** Installs one of the allowlist as superuser (`{ name: "pg_trgm", db?: "analytics" }`). */
    install(databaseId, body, opts) {
        return data(this, "POST", under(databaseId, "extensions"), body, opts);
    }
    /** Drops an extension (409 while objects depend on it). */
    delete(databaseId, name, query, opts) {
        return data(this, "DELETE", under(databaseId, "extensions", name), undefined, opts, query);
    }
}
/** How often {@link Logs.follow} asks for what is new. */
export const FOLLOW_INTERVAL_MS = 2000;
/**
 * A database's server log: `client.logs`. Entries come oldest first (newest last); `next_cursor` reads on after a
 * page (a tail), `prev_cursor` reads the entries before it.
 */
export class Logs extends Resource {
    /** The newest `limit` entries matching `query` (`severity`, `q`, `since`, `until`), or a page from `cursor`. */
    list(databaseId, query, opts) {
        return data(this, "GET", under(databaseId, "logs"), undefined, opts, query);
    }
    /**
     * The newest entries, then every entry written after them as it arrives (polling with `next_cursor` every
     * `intervalMs`), until `opts.signal` aborts.
     */
    async *follow(databaseId, query = {}, opts = {}) {
        const { intervalMs = FOLLOW_INTERVAL_MS, ...reqOpts } = opts;
        let page = await this.list(databaseId, query, reqOpts);
        for (;;) {
            yield* page.entries;
            if (reqOpts.signal?.aborted)
                return;
            if (page.entries.length < (query.limit ?? 100)) {
                const aborted = await new Promise((resolve) => {
                    const t = setTimeout(() => resolve(false), intervalMs);
                    reqOpts.signal?.addEventListener("abort", () => {
                        clearTimeout(t);
                        resolve(true);
                    }, { once: true });
                });
                if (aborted)
                    return;
            }
            page = await this.list(databaseId, { ...query, cursor: page.next_cursor }, reqOpts);
        }
    }
}
/** Query insights of a database (pg_stat_statements): `client.queries`. */
export class Queries extends Resource {
    /** Normalized statements ordered by `order_by` (total_time, mean_time or calls), at most `limit`. */
    list(databaseId, query, opts) {
        return data(this, "GET", under(databaseId, "queries"), undefined, opts, query);
    }
    /** Starts the statistics again from nothing. */
    reset(databaseId, opts) {
        return none(this, "POST", `${under(databaseId, "queries")}/reset`, opts);
    }
}
