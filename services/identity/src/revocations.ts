import { randomUUID } from "node:crypto";
import pg from "pg";
import type { Logger } from "@dbaas/kit";

/**
 * Tells every gateway, through every identity replica, that principals it may
 * have cached are stale: a member removed or their role changed, an API key
 * revoked, an organization's plan changed or the organization deleted.
 *
 * A revocation is a PostgreSQL NOTIFY issued inside the transaction that makes
 * the change, so it is heard exactly when (and only if) the change commits.
 * Each replica LISTENs on one connection and fans what it hears out to its
 * WatchRevocations streams. While that connection is down a replica holds no
 * streams at all: a gateway without a stream trusts nothing it cached, so a
 * notification lost with the connection can never leave a stale principal in use.
 */
export interface Revocation {
  organizationId: string;
  userId: string;
  credentialId: string;
}

type Queryable = Pick<pg.PoolClient, "query">;

export type SubscriptionEvent = Revocation | "idle" | "closed" | "aborted";

export interface Subscription {
  /**
   * The next revocation; "idle" when none came within `idleMs`, "closed" when
   * the feed broke (the subscriber must assume it missed something), "aborted"
   * when `signal` fired.
   */
  next(idleMs: number, signal: AbortSignal): Promise<SubscriptionEvent>;
  close(): void;
}

export interface RevocationHub {
  /** Issues the revocation in `db`'s transaction; returns an id to pass to `delivered` after commit. */
  publish(db: Queryable, revocation: Partial<Revocation>): Promise<string>;
  /**
   * Resolves once this replica's listener has heard the committed revocations
   * and handed them to its streams (or at once while the feed is down: then
   * there are no streams to tell). Bounded by a timeout, never rejects.
   */
  delivered(ids: string[]): Promise<void>;
  /** A new subscriber, or undefined while the feed is down. */
  subscribe(): Subscription | undefined;
  readonly live: boolean;
  start(): Promise<void>;
  close(): Promise<void>;
}

const DELIVERY_WAIT_MS = 2_000;
const MAX_RECONNECT_DELAY_MS = 5_000;
const PING_INTERVAL_MS = 10_000;
const PING_TIMEOUT_MS = 5_000;

class Queue implements Subscription {
  private items: Array<Revocation | "closed"> = [];
  private wake: (() => void) | undefined;
  constructor(private readonly onClose: (q: Queue) => void) {}

  push(item: Revocation | "closed"): void {
    this.items.push(item);
    this.wake?.();
  }

  async next(idleMs: number, signal: AbortSignal): Promise<SubscriptionEvent> {
    if (this.items.length === 0) {
      if (signal.aborted) return "aborted";
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, idleMs);
        signal.addEventListener("abort", done, { once: true });
        this.wake = done;
        function done() {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          resolve();
        }
      });
      this.wake = undefined;
    }
    const item = this.items.shift();
    if (item !== undefined) return item;
    return signal.aborted ? "aborted" : "idle";
  }

  close(): void {
    this.onClose(this);
  }
}

function parse(payload: string | undefined): { id: string; revocation: Revocation } | undefined {
  try {
    const p = JSON.parse(payload ?? "") as Record<string, unknown>;
    const str = (v: unknown) => (typeof v === "string" ? v : "");
    return {
      id: str(p.id),
      revocation: { organizationId: str(p.organization_id), userId: str(p.user_id), credentialId: str(p.credential_id) },
    };
  } catch {
    return undefined;
  }
}

export function createRevocationHub(databaseUrl: string, schema: string, log: Logger): RevocationHub {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name "${schema}"`);
  // Channels are per database, not per schema: two deployments sharing a database must not hear each other.
  const channel = `${schema}.revocations`;
  const subscribers = new Set<Queue>();
  const waiters = new Map<string, { heard: Promise<void>; release: () => void }>();
  let listener: pg.Client | undefined;
  let live = false;
  let closed = false;
  let failures = 0;
  let reconnectTimer: NodeJS.Timeout | undefined;

  const releaseWaiters = () => {
    for (const waiter of [...waiters.values()]) waiter.release();
  };

  const goDown = (reason: unknown) => {
    if (!live && listener === undefined) return;
    const wasLive = live;
    live = false;
    const client = listener;
    listener = undefined;
    client?.removeAllListeners();
    client?.on("error", () => {});
    void client?.end().catch(() => {});
    for (const sub of subscribers) sub.push("closed");
    subscribers.clear();
    releaseWaiters();
    if (wasLive) log.warn("revocation feed down; streams closed until it is back", { error: reason });
    if (!closed) scheduleReconnect();
  };

  const scheduleReconnect = () => {
    if (reconnectTimer) return;
    const delay = Math.min(200 * 2 ** failures, MAX_RECONNECT_DELAY_MS);
    failures++;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      void connect();
    }, delay);
    reconnectTimer.unref();
  };

  const connect = async (): Promise<void> => {
    if (closed) return;
    // A LISTEN connection is otherwise silent: keepalives and a periodic ping notice a dead one.
    const client = new pg.Client({ connectionString: databaseUrl, keepAlive: true, query_timeout: PING_TIMEOUT_MS });
    listener = client;
    client.on("error", (err) => goDown(err));
    client.on("end", () => goDown("connection ended"));
    client.on("notification", (msg) => {
      if (msg.channel !== channel) return;
      const parsed = parse(msg.payload);
      if (!parsed) return;
      for (const sub of subscribers) sub.push(parsed.revocation);
      waiters.get(parsed.id)?.release();
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${channel}"`);
      if (closed || listener !== client) {
        await client.end().catch(() => {});
        return;
      }
      live = true;
      if (failures > 0) log.info("revocation feed back");
      failures = 0;
      const ping = setInterval(() => {
        if (listener !== client) return clearInterval(ping);
        client.query("SELECT 1").catch((err: unknown) => listener === client && goDown(err));
      }, PING_INTERVAL_MS);
      ping.unref();
    } catch (err) {
      if (listener === client) goDown(err);
      if (failures === 1) log.warn("revocation feed cannot listen yet; retrying", { error: err });
    }
  };

  return {
    get live() {
      return live;
    },
    async publish(db, revocation) {
      const id = randomUUID();
      const payload = JSON.stringify({
        id,
        organization_id: revocation.organizationId ?? "",
        user_id: revocation.userId ?? "",
        credential_id: revocation.credentialId ?? "",
      });
      // Registered before commit: the listener may hear it before the committing call returns.
      // A rolled-back transaction's entry is dropped by the timer.
      if (live) {
        let release!: () => void;
        const heard = new Promise<void>((resolve) => (release = resolve));
        const timer = setTimeout(() => waiters.get(id)?.release(), DELIVERY_WAIT_MS);
        timer.unref();
        waiters.set(id, {
          heard,
          release: () => {
            clearTimeout(timer);
            waiters.delete(id);
            release();
          },
        });
      }
      await db.query("SELECT pg_notify($1, $2)", [channel, payload]);
      return id;
    },
    async delivered(ids) {
      await Promise.all(ids.map((id) => waiters.get(id)?.heard));
    },
    subscribe() {
      if (!live) return undefined;
      const q = new Queue((sub) => subscribers.delete(sub));
      subscribers.add(q);
      return q;
    },
    start: connect,
    async close() {
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      const client = listener;
      listener = undefined;
      live = false;
      for (const sub of subscribers) sub.push("closed");
      subscribers.clear();
      releaseWaiters();
      client?.removeAllListeners();
      client?.on("error", () => {});
      await client?.end().catch(() => {});
    },
  };
}
