import { setTimeout as sleep } from "node:timers/promises";
import { DbaasError, DbaasWaitError } from "../errors.ts";
import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, DatabaseStatus, ListData, Query, Schemas } from "../types.ts";
import { bytes, data, none, paged, Resource, seg } from "./base.ts";

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
export class Databases extends Resource {
  /** Creates a database; the answer carries its password, shown this once. Status starts at `provisioning`. */
  create(body: Body<"createDatabase">, opts?: RequestOptions): Promise<Schemas["CreatedDatabase"]> {
    return data(this, "POST", "/v1/databases", body, opts);
  }

  /** The organization's databases: `await` for a page, `for await` for all of them. */
  list(query?: Query<"listDatabases">, opts?: RequestOptions): PageIterator<Schemas["DatabaseListItem"]> {
    return paged(this, "/v1/databases", "databases", query, opts);
  }

  /** A database (its connection string's password masked). */
  get(id: string, opts?: RequestOptions): Promise<Schemas["Database"]> {
    return data(this, "GET", `/v1/databases/${seg(id)}`, undefined, opts);
  }

  /** Renames a database. */
  update(id: string, body: Body<"updateDatabase">, opts?: RequestOptions): Promise<Schemas["Database"]> {
    return data(this, "PATCH", `/v1/databases/${seg(id)}`, body, opts);
  }

  /** Deletes a database (its data is retained 7 days). */
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return none(this, "DELETE", `/v1/databases/${seg(id)}`, opts);
  }

  start(id: string, opts?: RequestOptions): Promise<Schemas["DatabaseStatus"]> {
    return data(this, "POST", `/v1/databases/${seg(id)}/start`, undefined, opts);
  }

  stop(id: string, opts?: RequestOptions): Promise<Schemas["DatabaseStatus"]> {
    return data(this, "POST", `/v1/databases/${seg(id)}/stop`, undefined, opts);
  }

  restart(id: string, opts?: RequestOptions): Promise<Schemas["DatabaseStatus"]> {
    return data(this, "POST", `/v1/databases/${seg(id)}/restart`, undefined, opts);
  }

  /** Moves a database to another tier. */
  resize(id: string, body: Body<"resizeDatabase">, opts?: RequestOptions): Promise<Schemas["ResizedDatabase"]> {
    return data(this, "POST", `/v1/databases/${seg(id)}/resize`, body, opts);
  }

  /** Replaces the password; the old one stops working at once. */
  resetPassword(id: string, opts?: RequestOptions): Promise<Schemas["Credentials"]> {
    return data(this, "POST", `/v1/databases/${seg(id)}/reset-password`, undefined, opts);
  }

  /** The operations run on a database, newest first. */
  listOperations(id: string, query?: Query<"listOperations">, opts?: RequestOptions): PageIterator<Schemas["Operation"]> {
    return paged(this, `/v1/databases/${seg(id)}/operations`, "operations", query, opts);
  }

  /** Metrics over [start, end] at `step` seconds. */
  getMetrics(id: string, query?: Query<"getMetrics">, opts?: RequestOptions): Promise<Schemas["Metrics"]> {
    return data(this, "GET", `/v1/databases/${seg(id)}/metrics`, undefined, opts, query);
  }

  /** The CA certificate (PEM) that signs the database's server certificate, for `sslmode=verify-full`. */
  async getCaCertificate(id: string, opts?: RequestOptions): Promise<string> {
    return new TextDecoder().decode(await bytes(this, `/v1/databases/${seg(id)}/ca-certificate`, opts));
  }

  /** The database's high availability: its standbys and mode, its members (the primary first), its last failover. */
  getHighAvailability(id: string, opts?: RequestOptions): Promise<Schemas["HighAvailability"]> {
    return data(this, "GET", `/v1/databases/${seg(id)}/high-availability`, undefined, opts);
  }

  /**
   * Sets the standbys (0, 1 or 2, each on another host of the region, billed
   * as compute) and synchronous mode (a commit returns once a standby has it).
   */
  setHighAvailability(id: string, body: Body<"setHighAvailability">, opts?: RequestOptions): Promise<Schemas["HighAvailability"]> {
    return data(this, "PUT", `/v1/databases/${seg(id)}/high-availability`, body, opts);
  }

  /**
   * A planned switchover to the healthiest standby (the connection string
   * stays the same); answers the `failover` operation, running until the
   * standby runs as the primary.
   */
  failover(id: string, opts?: RequestOptions): Promise<Schemas["Operation"]> {
    return data(this, "POST", `/v1/databases/${seg(id)}/failover`, undefined, opts);
  }

  /**
   * Polls the database until its status is `status`. Throws `DbaasWaitError`
   * on timeout, when it becomes `failed` (unless that is what is awaited) or
   * when it is gone (404).
   */
  async waitForStatus(id: string, status: DatabaseStatus, opts: WaitOptions = {}): Promise<Schemas["Database"]> {
    const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
    let last: DatabaseStatus | undefined;
    for (;;) {
      let db: Schemas["Database"];
      try {
        db = await this.get(id, { ...(opts.signal && { signal: opts.signal }) });
      } catch (err) {
        if (err instanceof DbaasError && err.status === 404) throw new DbaasWaitError(`${id} no longer exists`, last);
        throw err;
      }
      if (db.status !== last) opts.onStatus?.(db.status);
      last = db.status;
      if (db.status === status) return db;
      if (db.status === "failed") {
        throw new DbaasWaitError(`${id} failed${db.status_reason ? `: ${db.status_reason}` : ""} (waiting for ${status})`, last);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new DbaasWaitError(`${id} is still ${last} (waited for ${status})`, last);
      await sleep(Math.min(opts.intervalMs ?? 1000, left), undefined, { signal: opts.signal });
    }
  }
}

/** Base backups and point-in-time restore: `client.backups`. */
export class Backups extends Resource {
  /** A database's base backups, newest first; each page also carries the restore window and WAL archiving state. */
  list(
    databaseId: string,
    query?: Query<"listBackups">,
    opts?: RequestOptions,
  ): PageIterator<Schemas["Backup"], Omit<ListData<"listBackups">, "backups">> {
    return paged(this, `/v1/databases/${seg(databaseId)}/backups`, "backups", query, opts);
  }

  /** Takes a base backup now (status `running`); one at a time, of a running database. */
  create(databaseId: string, opts?: RequestOptions): Promise<Schemas["Backup"]> {
    return data(this, "POST", `/v1/databases/${seg(databaseId)}/backups`, undefined, opts);
  }

  /** Restores to a point in time as a NEW database (its own id and password, shown this once). */
  restore(databaseId: string, body: Body<"restoreDatabase">, opts?: RequestOptions): Promise<Schemas["RestoredDatabase"]> {
    return data(this, "POST", `/v1/databases/${seg(databaseId)}/restore`, body, opts);
  }
}
