import { setTimeout as sleep } from "node:timers/promises";
import { DbaasError, DbaasWaitError } from "../errors.js";
import { data, none, paged, Resource, seg } from "./base.js";
const path = (databaseId, replicaId) => `/v1/databases/${seg(databaseId)}/replicas${replicaId === undefined ? "" : `/${seg(replicaId)}`}`;
/**
 * Read replicas of a database: `client.replicas`. A replica is a read-only
 * hot standby reached with its database's own username and password.
 */
export class Replicas extends Resource {
    /** A database's replicas, each with its replication lag: `await` for a page, `for await` for all of them. */
    list(databaseId, query, opts) {
        return paged(this, path(databaseId), "replicas", query, opts);
    }
    /**
     * Creates a replica of a running database (status `provisioning`; tier and
     * region default to the database's). At most 5 per database; billed, so the
     * organization needs a payment method.
     */
    create(databaseId, body, opts) {
        return data(this, "POST", path(databaseId), body, opts);
    }
    get(databaseId, replicaId, opts) {
        return data(this, "GET", path(databaseId, replicaId), undefined, opts);
    }
    /** Deletes a replica; its data goes at once. */
    delete(databaseId, replicaId, opts) {
        return none(this, "DELETE", path(databaseId, replicaId), opts);
    }
    /**
     * Promotes a running replica to an independent, writable database (a new
     * `db-` id, the primary's credentials); the replica is gone.
     */
    promote(databaseId, replicaId, opts) {
        return data(this, "POST", `${path(databaseId, replicaId)}/promote`, undefined, opts);
    }
    /**
     * Polls the replica until its status is `status`. Throws `DbaasWaitError`
     * on timeout, when it becomes `failed` (unless that is what is awaited) or
     * when it is gone (404: deleted, promoted, or its database deleted).
     */
    async waitForStatus(databaseId, replicaId, status, opts = {}) {
        const deadline = Date.now() + (opts.timeoutMs ?? 600_000);
        let last;
        for (;;) {
            let replica;
            try {
                replica = await this.get(databaseId, replicaId, { ...(opts.signal && { signal: opts.signal }) });
            }
            catch (err) {
                if (err instanceof DbaasError && err.status === 404)
                    throw new DbaasWaitError(`${replicaId} no longer exists`, last);
                throw err;
            }
            if (replica.status !== last)
                opts.onStatus?.(replica.status);
            last = replica.status;
            if (replica.status === status)
                return replica;
            if (replica.status === "failed") {
                const why = replica.status_reason ? `: ${replica.status_reason}` : "";
                throw new DbaasWaitError(`${replicaId} failed${why} (waiting for ${status})`, last);
            }
            const left = deadline - Date.now();
            if (left <= 0)
                throw new DbaasWaitError(`${replicaId} is still ${last} (waited for ${status})`, last);
            await sleep(Math.min(opts.intervalMs ?? 1000, left), undefined, { signal: opts.signal });
        }
    }
}
