import { data, none, paged, Resource, seg } from "./base.js";
const base = (databaseId) => `/v1/databases/${seg(databaseId)}`;
/**
 * The addresses allowed to connect to a database, its pooler and its replicas:
 * `client.trustedSources`. An empty list admits every address; with entries,
 * any other address is refused within 5 seconds.
 */
export class TrustedSources extends Resource {
    /** `await` for a page, `for await` for every entry. */
    list(databaseId, query, opts) {
        return paged(this, `${base(databaseId)}/trusted-sources`, "trusted_sources", query, opts);
    }
    /** Admits `cidr` (an address or a network; `expires_at` for a while only). At most 50 per database. */
    add(databaseId, body, opts) {
        return data(this, "POST", `${base(databaseId)}/trusted-sources`, body, opts);
    }
    remove(databaseId, trustedSourceId, opts) {
        return none(this, "DELETE", `${base(databaseId)}/trusted-sources/${seg(trustedSourceId)}`, opts);
    }
}
/** A database's connection pooler (PgBouncer): `client.pooler`. */
export class Pooler extends Resource {
    get(databaseId, opts) {
        return data(this, "GET", `${base(databaseId)}/pooler`, undefined, opts);
    }
    /** Enables or disables it, or changes its mode or pool size (1 … the tier's max_connections − 5). */
    update(databaseId, body, opts) {
        return data(this, "PATCH", `${base(databaseId)}/pooler`, body, opts);
    }
}
