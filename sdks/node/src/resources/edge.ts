import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, Schemas } from "../types.ts";
import { data, none, paged, Resource, seg } from "./base.ts";

const base = (databaseId: string) => `/v1/databases/${seg(databaseId)}`;

/**
 * The addresses allowed to connect to a database, its pooler and its replicas:
 * `client.trustedSources`. An empty list admits every address; with entries,
 * any other address is refused within 5 seconds.
 */
export class TrustedSources extends Resource {
  /** `await` for a page, `for await` for every entry. */
  list(databaseId: string, query?: Query<"listTrustedSources">, opts?: RequestOptions): PageIterator<Schemas["TrustedSource"]> {
    return paged(this, `${base(databaseId)}/trusted-sources`, "trusted_sources", query, opts);
  }

  /** Admits `cidr` (an address or a network; `expires_at` for a while only). At most 50 per database. */
  add(databaseId: string, body: Body<"createTrustedSource">, opts?: RequestOptions): Promise<Schemas["TrustedSource"]> {
    return data(this, "POST", `${base(databaseId)}/trusted-sources`, body, opts);
  }

  remove(databaseId: string, trustedSourceId: string, opts?: RequestOptions): Promise<void> {
    return none(this, "DELETE", `${base(databaseId)}/trusted-sources/${seg(trustedSourceId)}`, opts);
  }
}

/** A database's connection pooler (PgBouncer): `client.pooler`. */
export class Pooler extends Resource {
  get(databaseId: string, opts?: RequestOptions): Promise<Schemas["Pooler"]> {
    return data(this, "GET", `${base(databaseId)}/pooler`, undefined, opts);
  }

  /** Enables or disables it, or changes its mode or pool size (1 … the tier's max_connections − 5). */
  update(databaseId: string, body: Body<"updatePooler">, opts?: RequestOptions): Promise<Schemas["Pooler"]> {
    return data(this, "PATCH", `${base(databaseId)}/pooler`, body, opts);
  }
}
