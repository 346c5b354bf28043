import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, ReplicaStatus, Schemas } from "../types.ts";
import { Resource } from "./base.ts";
import type { WaitOptions } from "./databases.ts";
/**
 * Read replicas of a database: `client.replicas`. A replica is a read-only
 * hot standby reached with its database's own username and password.
 */
export declare class Replicas extends Resource {
    /** A database's replicas, each with its replication lag: `await` for a page, `for await` for all of them. */
    list(databaseId: string, query?: Query<"listReplicas">, opts?: RequestOptions): PageIterator<Schemas["Replica"]>;
    /**
     * Creates a replica of a running database (status `provisioning`; tier and
     * region default to the database's). At most 5 per database; billed, so the
     * organization needs a payment method.
     */
    create(databaseId: string, body: Body<"createReplica">, opts?: RequestOptions): Promise<Schemas["Replica"]>;
    get(databaseId: string, replicaId: string, opts?: RequestOptions): Promise<Schemas["Replica"]>;
    /** Deletes a replica; its data goes at once. */
    delete(databaseId: string, replicaId: string, opts?: RequestOptions): Promise<void>;
    /**
     * Promotes a running replica to an independent, writable database (a new
     * `db-` id, the primary's credentials); the replica is gone.
     */
    promote(databaseId: string, replicaId: string, opts?: RequestOptions): Promise<Schemas["Database"]>;
    /**
     * Polls the replica until its status is `status`. Throws `DbaasWaitError`
     * on timeout, when it becomes `failed` (unless that is what is awaited) or
     * when it is gone (404: deleted, promoted, or its database deleted).
     */
    waitForStatus(databaseId: string, replicaId: string, status: ReplicaStatus, opts?: WaitOptions<ReplicaStatus>): Promise<Schemas["Replica"]>;
}
