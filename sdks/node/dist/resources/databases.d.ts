import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, DatabaseStatus, ListData, Query, Schemas } from "../types.ts";
import { Resource } from "./base.ts";
/** How `waitForStatus` polls; `S`: the statuses of what it waits for (a database's by default, or a replica's). */
export interface WaitOptions<S extends string = DatabaseStatus> {
    /** Give up after this long; default 5 minutes. */
    timeoutMs?: number;
    /** Between two reads; default 1 s (every read counts against the rate limit). */
    intervalMs?: number;
    /** Called with each status seen that differs from the previous one (progress output). */
    onStatus?: (status: S) => void;
    signal?: AbortSignal;
}
/** Databases and their lifecycle: `client.databases`. */
export declare class Databases extends Resource {
    /** Creates a database; the answer carries its password, shown this once. Status starts at `provisioning`. */
    create(body: Body<"createDatabase">, opts?: RequestOptions): Promise<Schemas["CreatedDatabase"]>;
    /** The organization's databases: `await` for a page, `for await` for all of them. */
    list(query?: Query<"listDatabases">, opts?: RequestOptions): PageIterator<Schemas["DatabaseListItem"]>;
    /** A database (its connection string's password masked). */
    get(id: string, opts?: RequestOptions): Promise<Schemas["Database"]>;
    /** Renames a database. */
    update(id: string, body: Body<"updateDatabase">, opts?: RequestOptions): Promise<Schemas["Database"]>;
    /** Deletes a database (its data is retained 7 days). */
    delete(id: string, opts?: RequestOptions): Promise<void>;
    start(id: string, opts?: RequestOptions): Promise<Schemas["DatabaseStatus"]>;
    stop(id: string, opts?: RequestOptions): Promise<Schemas["DatabaseStatus"]>;
    restart(id: string, opts?: RequestOptions): Promise<Schemas["DatabaseStatus"]>;
    /** Moves a database to another tier. */
    resize(id: string, body: Body<"resizeDatabase">, opts?: RequestOptions): Promise<Schemas["ResizedDatabase"]>;
    /** Replaces the password; the old one stops working at once. */
    resetPassword(id: string, opts?: RequestOptions): Promise<Schemas["Credentials"]>;
    /** The operations run on a database, newest first. */
    listOperations(id: string, query?: Query<"listOperations">, opts?: RequestOptions): PageIterator<Schemas["Operation"]>;
    /** Metrics over [start, end] at `step` seconds. */
    getMetrics(id: string, query?: Query<"getMetrics">, opts?: RequestOptions): Promise<Schemas["Metrics"]>;
    /** The CA certificate (PEM) that signs the database's server certificate, for `sslmode=verify-full`. */
    getCaCertificate(id: string, opts?: RequestOptions): Promise<string>;
    /** The database's high availability: its standbys and mode, its members (the primary first), its last failover. */
    getHighAvailability(id: string, opts?: RequestOptions): Promise<Schemas["HighAvailability"]>;
    /**
     * Sets the standbys (0, 1 or 2, each on another host of the region, billed
     * as compute) and synchronous mode (a commit returns once a standby has it).
     */
    setHighAvailability(id: string, body: Body<"setHighAvailability">, opts?: RequestOptions): Promise<Schemas["HighAvailability"]>;
    /**
     * A planned switchover to the healthiest standby (the connection string
     * stays the same); answers the `failover` operation, running until the
     * standby runs as the primary.
     */
    failover(id: string, opts?: RequestOptions): Promise<Schemas["Operation"]>;
    /**
     * Polls the database until its status is `status`. Throws `DbaasWaitError`
     * on timeout, when it becomes `failed` (unless that is what is awaited) or
     * when it is gone (404).
     */
    waitForStatus(id: string, status: DatabaseStatus, opts?: WaitOptions): Promise<Schemas["Database"]>;
}
/** Base backups and point-in-time restore: `client.backups`. */
export declare class Backups extends Resource {
    /** A database's base backups, newest first; each page also carries the restore window and WAL archiving state. */
    list(databaseId: string, query?: Query<"listBackups">, opts?: RequestOptions): PageIterator<Schemas["Backup"], Omit<ListData<"listBackups">, "backups">>;
    /** Takes a base backup now (status `running`); one at a time, of a running database. */
    create(databaseId: string, opts?: RequestOptions): Promise<Schemas["Backup"]>;
    /** Restores to a point in time as a NEW database (its own id and password, shown this once). */
    restore(databaseId: string, body: Body<"restoreDatabase">, opts?: RequestOptions): Promise<Schemas["RestoredDatabase"]>;
}
