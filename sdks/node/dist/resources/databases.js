import { setTimeout as sleep } from "node:timers/promises";
import { DbaasError, DbaasWaitError } from "../errors.js";
import { bytes, data, none, paged, Resource, seg } from "./base.js";
/** Databases and their lifecycle: `client.databases`. */
export class Databases extends Resource {
    /** Creates a database; the answer carries its password, shown this once. Status starts at `provisioning`. */
    create(body, opts) {
        return data(this, "POST", "/v1/databases", body, opts);
    }
    /** The organization's databases: `await` for a page, `for await` for all of them. */
    list(query, opts) {
        return paged(this, "/v1/databases", "databases", query, opts);
    }
    /** A database (its connection string's password masked). */
    get(id, opts) {
        return data(this, "GET", `/v1/databases/${seg(id)}`, undefined, opts);
    }
    /** Renames a database. */
    update(id, body, opts) {
        return data(this, "PATCH", `/v1/databases/${seg(id)}`, body, opts);
    }
    /** Deletes a database (its data is retained 7 days). */
    delete(id, opts) {
        return none(this, "DELETE", `/v1/databases/${seg(id)}`, opts);
    }
    start(id, opts) {
        return data(this, "POST", `/v1/databases/${seg(id)}/start`, undefined, opts);
    }
    stop(id, opts) {
        return data(this, "POST", `/v1/databases/${seg(id)}/stop`, undefined, opts);
    }
    restart(id, opts) {
        return data(this, "POST", `/v1/databases/${seg(id)}/restart`, undefined, opts);
    }
    /** Moves a database to another tier. */
    resize(id, body, opts) {
        return data(this, "POST", `/v1/databases/${seg(id)}/resize`, body, opts);
    }
    /** Replaces the password; the old one stops working at once. */
    resetPassword(id, opts) {
        return data(this, "POST", `/v1/databases/${seg(id)}/reset-password`, undefined, opts);
    }
    /** The operations run on a database, newest first. */
    listOperations(id, query, opts) {
        return paged(this, `/v1/databases/${seg(id)}/operations`, "operations", query, opts);
    }
    /** Metrics over [start, end] at `step` seconds. */
    getMetrics(id, query, opts) {
        return data(this, "GET", `/v1/databases/${seg(id)}/metrics`, undefined, opts, query);
    }
    /** The CA certificate (PEM) that signs the database's server certificate, for `sslmode=verify-full`. */
    async getCaCertificate(id, opts) {
        return new TextDecoder().decode(await bytes(this, `/v1/databases/${seg(id)}/ca-certificate`, opts));
    }
    /** The database's high availability: its standbys and mode, its members (the primary first), its last failover. */
    getHighAvailability(id, opts) {
        return data(this, "GET", `/v1/databases/${seg(id)}/high-availability`, undefined, opts);
    }
    /**
     * Sets the standbys (0, 1 or 2, each on another host of the region, billed
     * as compute) and synchronous mode (a commit returns once a standby has it).
     */
    setHighAvailability(id, body, opts) {
        return data(this, "PUT", `/v1/databases/${seg(id)}/high-availability`, body, opts);
    }
    /**
     * A planned switchover to the healthiest standby (the connection string
     * stays the same); answers the `failover` operation, running until the
     * standby runs as the primary.
     */
    failover(id, opts) {
        return data(this, "POST", `/v1/databases/${seg(id)}/failover`, undefined, opts);
    }
    /**
     * Polls the database until its status is `status`. Throws `DbaasWaitError`
     * on timeout, when it becomes `failed` (unless that is what is awaited) or
     * when it is gone (404).
     */
    async waitForStatus(id, status, opts = {}) {
        const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
        let last;
        for (;;) {
            let db;
            try {
                db = await this.get(id, { ...(opts.signal && { signal: opts.signal }) });
            }
            catch (err) {
                if (err instanceof DbaasError && err.status === 404)
                    throw new DbaasWaitError(`${id} no longer exists`, last);
                throw err;
            }
            if (db.status !== last)
                opts.onStatus?.(db.status);
            last = db.status;
            if (db.status === status)
                return db;
            if (db.status === "failed") {
                throw new DbaasWaitError(`${id} failed${db.status_reason ? `: ${db.status_reason}` : ""} (waiting for ${status})`, last);
            }
            const left = deadline - Date.now();
            if (left <= 0)
                throw new DbaasWaitError(`${id} is still ${last} (waited for ${status})`, last);
            await sleep(Math.min(opts.intervalMs ?? 1000, left), undefined, { signal: opts.signal });
        }
    }
}
/** Base backups and point-in-time restore: `client.backups`. */
export class Backups extends Resource {
    /** A database's base backups, newest first; each page also carries the restore window and WAL archiving state. */
    list(databaseId, query, opts) {
        return paged(this, `/v1/databases/${seg(databaseId)}/backups`, "backups", query, opts);
    }
    /** Takes a base backup now (status `running`); one at a time, of a running database. */
    create(databaseId, opts) {
        return data(this, "POST", `/v1/databases/${seg(databaseId)}/backups`, undefined, opts);
    }
    /** Restores to a point in time as a NEW database (its own id and password, shown this once). */
    restore(databaseId, body, opts) {
        return data(this, "POST", `/v1/databases/${seg(databaseId)}/restore`, body, opts);
    }
}
