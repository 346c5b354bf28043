import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, Schemas } from "../types.ts";
import { data, none, paged, Resource, seg } from "./base.ts";

const under = (databaseId: string, what: string, name?: string) =>
  `/v1/databases/${seg(databaseId)}/${what}${name === undefined ? "" : `/${seg(name)}`}`;

/**
 * A database's roles: `client.roles`. Read from and changed on the running
 * server; a role made here is a LOGIN role, never superuser, and its
 * password is shown once (in `create` and `resetPassword`).
 */
export class Roles extends Resource {
  /** The database's roles by name, dbadmin included: `await` for a page, `for await` for all of them. */
  list(databaseId: string, query?: Query<"listRoles">, opts?: RequestOptions): PageIterator<Schemas["Role"]> {
    return paged(this, under(databaseId, "roles"), "roles", query, opts);
  }

  /** Creates a role with a generated password (in the answer, shown this once). At most 50 per database. */
  create(databaseId: string, body: Body<"createRole">, opts?: RequestOptions): Promise<Schemas["CreatedRole"]> {
    return data(this, "POST", under(databaseId, "roles"), body, opts);
  }

  /** Drops a role and ends its sessions (409 while it owns objects; dbadmin cannot go). */
  delete(databaseId: string, name: string, opts?: RequestOptions): Promise<void> {
    return none(this, "DELETE", under(databaseId, "roles", name), opts);
  }

  /** A new password for the role; the old one and its sessions end before the answer arrives. */
  resetPassword(databaseId: string, name: string, opts?: RequestOptions): Promise<Schemas["CreatedRole"]> {
    return data(this, "POST", `${under(databaseId, "roles", name)}/reset-password`, undefined, opts);
  }
}

/** A database's logical databases (the server's, defaultdb included): `client.dbs`. */
export class Dbs extends Resource {
  list(databaseId: string, query?: Query<"listDbs">, opts?: RequestOptions): PageIterator<Schemas["LogicalDb"]> {
    return paged(this, under(databaseId, "dbs"), "dbs", query, opts);
  }

  /** Creates a logical database owned by `owner` (default dbadmin). */
  create(databaseId: string, body: Body<"createDb">, opts?: RequestOptions): Promise<Schemas["LogicalDb"]> {
    return data(this, "POST", under(databaseId, "dbs"), body, opts);
  }

  /** Drops a logical database (409 for defaultdb, or while it has connections). */
  delete(databaseId: string, name: string, opts?: RequestOptions): Promise<void> {
    return none(this, "DELETE", under(databaseId, "dbs", name), opts);
  }
}

/**
 * A database's configuration: `client.config`. `update` is all or nothing; on a running database it
 * answers once the server has the change (restart-only parameters show `pending_restart`).
 */
export class Config extends Resource {
  get(databaseId: string, opts?: RequestOptions): Promise<Schemas["Config"]> {
    return data(this, "GET", under(databaseId, "config"), undefined, opts);
  }

  /** `{ parameters: { work_mem: "64MB", jit: false, statement_timeout: null } }` (null: back to the default). */
  update(databaseId: string, body: Body<"updateConfig">, opts?: RequestOptions): Promise<Schemas["Config"]> {
    return data(this, "PATCH", under(databaseId, "config"), body, opts);
  }
}

/** Extensions of a database's server: `client.extensions`. `db` names the logical database (default defaultdb). */
export class Extensions extends Resource {
  /** What the server's binaries offer, installed or not in `db`, and whether each can be installed (`allowed`). */
  list(databaseId: string, query?: Query<"listExtensions">, opts?: RequestOptions): PageIterator<Schemas["Extension"]> {
    return paged(this, under(databaseId, "extensions"), "extensions", query, opts);
  }

  /** Installs one of the allowlist as superuser (`{ name: "pg_trgm", db?: "analytics" }`). */
  install(databaseId: string, body: Body<"installExtension">, opts?: RequestOptions): Promise<Schemas["Extension"]> {
    return data(this, "POST", under(databaseId, "extensions"), body, opts);
  }

  /** Drops an extension (409 while objects depend on it). */
  delete(databaseId: string, name: string, query?: Query<"deleteExtension">, opts?: RequestOptions): Promise<void> {
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
  list(databaseId: string, query?: Query<"listLogs">, opts?: RequestOptions): Promise<Schemas["LogPage"]> {
    return data(this, "GET", under(databaseId, "logs"), undefined, opts, query);
  }

  /**
   * The newest entries, then every entry written after them as it arrives (polling with `next_cursor` every
   * `intervalMs`), until `opts.signal` aborts.
   */
  async *follow(
    databaseId: string,
    query: Omit<Query<"listLogs">, "cursor"> = {},
    opts: RequestOptions & { intervalMs?: number } = {},
  ): AsyncGenerator<Schemas["LogPage"]["entries"][number]> {
    const { intervalMs = FOLLOW_INTERVAL_MS, ...reqOpts } = opts;
    let page = await this.list(databaseId, query, reqOpts);
    for (;;) {
      yield* page.entries;
      if (reqOpts.signal?.aborted) return;
      if (page.entries.length < (query.limit ?? 100)) {
        const aborted = await new Promise<boolean>((resolve) => {
          const t = setTimeout(() => resolve(false), intervalMs);
          reqOpts.signal?.addEventListener(
            "abort",
            () => {
              clearTimeout(t);
              resolve(true);
            },
            { once: true },
          );
        });
        if (aborted) return;
      }
      page = await this.list(databaseId, { ...query, cursor: page.next_cursor }, reqOpts);
    }
  }
}

/** Query insights of a database (pg_stat_statements): `client.queries`. */
export class Queries extends Resource {
  /** Normalized statements ordered by `order_by` (total_time, mean_time or calls), at most `limit`. */
  list(databaseId: string, query?: Query<"listQueries">, opts?: RequestOptions): Promise<Schemas["QueryPage"]> {
    return data(this, "GET", under(databaseId, "queries"), undefined, opts, query);
  }

  /** Starts the statistics again from nothing. */
  reset(databaseId: string, opts?: RequestOptions): Promise<void> {
    return none(this, "POST", `${under(databaseId, "queries")}/reset`, opts);
  }
}
