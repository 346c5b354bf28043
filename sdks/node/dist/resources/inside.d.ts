import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, Schemas } from "../types.ts";
import { Resource } from "./base.ts";
/**
 * A database's roles: `client.roles`. Read from and changed on the running
 * server; a role made here is a LOGIN role, never superuser, and its
 * password is shown once (in `create` and `resetPassword`).
 */
export declare class Roles extends Resource {
    /** The database's roles by name, dbadmin included: `await` for a page, `for await` for all of them. */
    list(databaseId: string, query?: Query<"listRoles">, opts?: RequestOptions): PageIterator<Schemas["Role"]>;
    /** Creates a role with a generated password (in the answer, shown this once). At most 50 per database. */
    create(databaseId: string, body: Body<"createRole">, opts?: RequestOptions): Promise<Schemas["CreatedRole"]>;
    /** Drops a role and ends its sessions (409 while it owns objects; dbadmin cannot go). */
    delete(databaseId: string, name: string, opts?: RequestOptions): Promise<void>;
    /** A new password for the role; the old one and its sessions end before the answer arrives. */
    resetPassword(databaseId: string, name: string, opts?: RequestOptions): Promise<Schemas["CreatedRole"]>;
}
/** A database's logical databases (the server's, defaultdb included): `client.dbs`. */
export declare class Dbs extends Resource {
    list(databaseId: string, query?: Query<"listDbs">, opts?: RequestOptions): PageIterator<Schemas["LogicalDb"]>;
    /** Creates a logical database owned by `owner` (default dbadmin). */
    create(databaseId: string, body: Body<"createDb">, opts?: RequestOptions): Promise<Schemas["LogicalDb"]>;
    /** Drops a logical database (409 for defaultdb, or while it has connections). */
    delete(databaseId: string, name: string, opts?: RequestOptions): Promise<void>;
}
/**
 * A database's configuration: `client.config`. `update` is all or nothing; on a running database it
 * answers once the server has the change (restart-only parameters show `pending_restart`).
 */
export declare class Config extends Resource {
    get(databaseId: string, opts?: RequestOptions): Promise<Schemas["Config"]>;
    /** `{ parameters: { work_mem: "64MB", jit: false, statement_timeout: null } }` (null: back to the default). */
    update(databaseId: string, body: Body<"updateConfig">, opts?: RequestOptions): Promise<Schemas["Config"]>;
}
/** Extensions of a database's server: `client.extensions`. `db` names the logical database (default defaultdb). */
export declare class Extensions extends Resource {
    /** What the server's binaries offer, installed or not in `db`, and whether each can be installed (`allowed`). */
    list(databaseId: string, query?: Query<"listExtensions">, opts?: RequestOptions): PageIterator<Schemas["Extension"]>;
    /** Installs one of the allowlist as superuser (`{ name: "pg_trgm", db?: "analytics" }`). */
    install(databaseId: string, body: Body<"installExtension">, opts?: RequestOptions): Promise<Schemas["Extension"]>;
    /** Drops an extension (409 while objects depend on it). */
    delete(databaseId: string, name: string, query?: Query<"deleteExtension">, opts?: RequestOptions): Promise<void>;
}
/** How often {@link Logs.follow} asks for what is new. */
export declare const FOLLOW_INTERVAL_MS = 2000;
/**
 * A database's server log: `client.logs`. Entries come oldest first (newest last); `next_cursor` reads on after a
 * page (a tail), `prev_cursor` reads the entries before it.
 */
export declare class Logs extends Resource {
    /** The newest `limit` entries matching `query` (`severity`, `q`, `since`, `until`), or a page from `cursor`. */
    list(databaseId: string, query?: Query<"listLogs">, opts?: RequestOptions): Promise<Schemas["LogPage"]>;
    /**
     * The newest entries, then every entry written after them as it arrives (polling with `next_cursor` every
     * `intervalMs`), until `opts.signal` aborts.
     */
    follow(databaseId: string, query?: Omit<Query<"listLogs">, "cursor">, opts?: RequestOptions & {
        intervalMs?: number;
    }): AsyncGenerator<Schemas["LogPage"]["entries"][number]>;
}
/** Query insights of a database (pg_stat_statements): `client.queries`. */
export declare class Queries extends Resource {
    /** Normalized statements ordered by `order_by` (total_time, mean_time or calls), at most `limit`. */
    list(databaseId: string, query?: Query<"listQueries">, opts?: RequestOptions): Promise<Schemas["QueryPage"]>;
    /** Starts the statistics again from nothing. */
    reset(databaseId: string, opts?: RequestOptions): Promise<void>;
}
