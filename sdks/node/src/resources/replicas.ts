import { setTimeout as sleep } from "node:timers/promises";
import { DbaasError, DbaasWaitError } from "../errors.ts";
import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, ReplicaStatus, Schemas } from "../types.ts";
import { data, none, paged, Resource, seg } from "./base.ts";
import type { WaitOptions } from "./databases.ts";

const path = (databaseId: string, replicaId?: string) =>
  `/v1/databases/${seg(databaseId)}/replicas${replicaId === undefined ? "" : `/${seg(replicaId)}`}`;

/**
 * Read replicas of a database: `client.replicas`. A replica is a read-only
 * hot standby reached with its database's own username and password.
 */
export class Replicas extends Resource {
  /** A database's replicas, each with its replication lag: `await` for a page, `for await` for all of them. */
  list(databaseId: string, query?: Query<"listReplicas">, opts?: RequestOptions): PageIterator<Schemas["Replica"]> {
    return paged(this, path(databaseId), "replicas", query, opts);
  }

  /**
   * Creates a replica of a running database (status `provisioning`; tier and
   * region default to the database's). At most 5 per database; billed, so the
   * organization needs a payment method.
   */
  create(databaseId: string, body: Body<"createReplica">, opts?: RequestOptions): Promise<Schemas["Replica"]> {
    return data(this, "POST", path(databaseId), body, opts);
  }

  get(databaseId: string, replicaId: string, opts?: RequestOptions): Promise<Schemas["Replica"]> {
    return data(this, "GET", path(databaseId, replicaId), undefined, opts);
  }

  /** Deletes a replica; its data goes at once. */
  delete(databaseId: string, replicaId: string, opts?: RequestOptions): Promise<void> {
    return none(this, "DELETE", path(databaseId, replicaId), opts);
  }

  /**
   * Promotes a running replica to an independent, writable database (a new
   * `db-` id, the primary's credentials); the replica is gone.
   */
  promote(databaseId: string, replicaId: string, opts?: RequestOptions): Promise<Schemas["Database"]> {
    return data(this, "POST", `${path(databaseId, replicaId)}/promote`, undefined, opts);
  }

  /**
   * Polls the replica until its status is `status`. Throws `DbaasWaitError`
   * on timeout, when it becomes `failed` (unless that is what is awaited) or
   * when it is gone (404: deleted, promoted, or its database deleted).
   */
  async waitForStatus(
    databaseId: string,
    replicaId: string,
    status: ReplicaStatus,
    opts: WaitOptions<ReplicaStatus> = {},
  ): Promise<Schemas["Replica"]> {
    const deadline = Date.now() + (opts.timeoutMs ?? 600_000);
    let last: ReplicaStatus | undefined;
    for (;;) {
      let replica: Schemas["Replica"];
      try {
        replica = await this.get(databaseId, replicaId, { ...(opts.signal && { signal: opts.signal }) });
      } catch (err) {
        if (err instanceof DbaasError && err.status === 404) throw new DbaasWaitError(`${replicaId} no longer exists`, last);
        throw err;
      }
      if (replica.status !== last) opts.onStatus?.(replica.status);
      last = replica.status;
      if (replica.status === status) return replica;
      if (replica.status === "failed") {
        const why = replica.status_reason ? `: ${replica.status_reason}` : "";
        throw new DbaasWaitError(`${replicaId} failed${why} (waiting for ${status})`, last);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new DbaasWaitError(`${replicaId} is still ${last} (waited for ${status})`, last);
      await sleep(Math.min(opts.intervalMs ?? 1000, left), undefined, { signal: opts.signal });
    }
  }
}
