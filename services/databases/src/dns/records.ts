import type pg from "pg";
import type { Logger } from "@dbaas/kit";
import type { Config } from "../config.ts";
import {
  forgetRecord,
  noteRecord,
  noteWaitingForRecord,
  staleRecords,
  wantedRecord,
  wantedRecords,
  type WantedRecord,
} from "../db/dns-records.ts";
import { hostOf, poolerHost } from "../mappers.ts";
import { whileHolding } from "../singleton.ts";
import { rfc2136Client, type Rfc2136Client } from "./wire.ts";

/*
 * The databases' host names in DNS (docs/product.md, "Host names in DNS"). With
 * DNS_PROVIDER=rfc2136 every live database and replica has A/AAAA records
 * for `<id>.<DATABASE_DOMAIN>` pointing at its agent's public addresses:
 *
 * - published (and confirmed by the server) before a report moves it to
 *   `running` — observations.ts asks `publishBeforeRunning` and sets running
 *   only with the confirmation in hand; a failure leaves the status where it
 *   is, the reason in `status_reason`, retried with backoff;
 * - `publishRecord` is the one way a record is set: a move (an agent's new
 *   address, a failover) calls it with the database's new place in its row;
 * - deleted with the database (`removeStaleRecords` after a delete, a
 *   replica's removal, a promotion);
 * - compared with the server's own answer every DNS_RECONCILE_INTERVAL_MS and
 *   repaired when changed or lost behind our back (`reconcileRecords`).
 *
 * With DNS_PROVIDER=none nothing is published and nothing waits (one host, a
 * wildcard someone else keeps).
 */

export interface HostRecords {
  client: Rfc2136Client;
  zone: string;
  domain: string;
  ttlSeconds: number;
  /** Per database: consecutive failures and when the next attempt before running may be made. */
  backoff: Map<string, { failures: number; retryAt: number }>;
}

/** The context's host records: undefined with DNS_PROVIDER=none. */
export function createHostRecords(cfg: Config): HostRecords | undefined {
  const dns = cfg.dns;
  if (dns.provider === "none") return undefined;
  return {
    client: rfc2136Client(dns.server, dns.key, dns.timeoutMs),
    zone: dns.zone,
    domain: cfg.databaseDomain,
    ttlSeconds: dns.ttlSeconds,
    backoff: new Map(),
  };
}

interface Ctx {
  pool: pg.Pool;
  log: Logger;
  dns?: HostRecords;
}

/** A record the server confirmed: the database, the agent it pointed at and the addresses. */
export interface PublishedRecord {
  databaseId: string;
  agentId: string;
  addresses: string[];
}

/** A database with standbys: its records' TTL, so clients follow a failover's move within seconds. */
export const HA_RECORD_TTL_SECONDS = 5;

/**
 * The TTL of a database's records: DNS_TTL_SECONDS (30 s); 5 s for a
 * database with standbys, so a failover's move is seen soon (never more than
 * DNS_TTL_SECONDS).
 */
export function recordTtl(dns: HostRecords, record: WantedRecord): number {
  return record.ha ? Math.min(HA_RECORD_TTL_SECONDS, dns.ttlSeconds) : dns.ttlSeconds;
}

/**
 * The names of database `id`: its own and, for a database (not a replica), its pooler's
 * `<id>-pooler.<domain>` (docs/product.md, Trusted sources and connection pooling), on the same host.
 */
export function namesOf(id: string, domain: string): string[] {
  return id.startsWith("rep-") ? [hostOf(id, domain)] : [hostOf(id, domain), poolerHost(id, domain)];
}

const sameAddresses = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && [...a].sort().join() === [...b].sort().join();

/**
 * Sets database `id`'s records to what its row and agent say now (removes
 * them when it is not live); answers what the server confirmed. Throws on
 * a refusal or an unreachable server. The one way records are set: the
 * lifecycle before running, the reconcile, a move, a failover.
 */
export async function publishRecord(ctx: Ctx, id: string): Promise<PublishedRecord | undefined> {
  const dns = ctx.dns;
  if (!dns) return undefined;
  const wanted = await wantedRecord(ctx.pool, id);
  if (!wanted) {
    for (const name of namesOf(id, dns.domain)) await removeRecord(ctx, dns, name);
    return undefined;
  }
  if (wanted.addresses.length === 0) throw new Error(`agent ${wanted.agent_id} registered no public address (AGENT_PUBLIC_ADDRESS)`);
  const ttl = recordTtl(dns, wanted);
  for (const name of namesOf(id, dns.domain)) {
    await noteRecord(ctx.pool, name, id, wanted.addresses, ttl);
    await dns.client.update(dns.zone, name, wanted.addresses, ttl);
  }
  dns.backoff.delete(id);
  return { databaseId: id, agentId: wanted.agent_id, addresses: wanted.addresses };
}

async function removeRecord(ctx: Ctx, dns: HostRecords, name: string): Promise<void> {
  await dns.client.update(dns.zone, name, [], dns.ttlSeconds);
  await forgetRecord(ctx.pool, name);
}

/**
 * Before a report moves database `id` to running: its record published, or
 * why not recorded as its status reason and logged (the status stays), the
 * next attempt after a backoff of 1 s, 2 s, 4 s … up to a minute. Answers
 * the confirmed record, or undefined while it is missing.
 */
export async function publishBeforeRunning(ctx: Ctx, id: string, now = Date.now()): Promise<PublishedRecord | undefined> {
  const dns = ctx.dns;
  if (!dns) return undefined;
  const b = dns.backoff.get(id);
  if (b && now < b.retryAt) return undefined;
  try {
    return await publishRecord(ctx, id);
  } catch (err) {
    const failures = (b?.failures ?? 0) + 1;
    dns.backoff.set(id, { failures, retryAt: now + Math.min(1000 * 2 ** (failures - 1), 60_000) });
    const reason = `waiting for its DNS record: ${(err as Error).message}`;
    ctx.log.warn("DNS record not published; the database stays where it is until it is", { database_id: id, failures, error: err });
    await noteWaitingForRecord(ctx.pool, id, reason);
    return undefined;
  }
}

/** Whether `published` is database `row`'s record as it should be now (the agent and its addresses unchanged since). */
export async function recordCurrent(
  db: pg.ClientBase,
  row: { id: string; agent_id: string },
  published: PublishedRecord | undefined,
): Promise<boolean> {
  if (!published || published.databaseId !== row.id || published.agentId !== row.agent_id) return false;
  const now = await wantedRecord(db, row.id);
  return now !== undefined && sameAddresses(now.addresses, published.addresses);
}

/** Removes the records of databases no longer live (deleted, retired by a promotion). Answers how many went. */
export async function removeStaleRecords(ctx: Ctx): Promise<number> {
  const dns = ctx.dns;
  if (!dns) return 0;
  const names = await staleRecords(ctx.pool);
  for (const name of names) await removeRecord(ctx, dns, name);
  return names.length;
}

/** After a delete committed: the records go now; a failure is logged and left to the reconcile. */
export async function removeStaleRecordsSoon(ctx: Ctx): Promise<void> {
  await removeStaleRecords(ctx).catch((err: unknown) =>
    ctx.log.warn("DNS records of deleted databases not removed yet; the reconcile retries", { error: err }),
  );
}

/** Re-publishes every live database of `agentId` (its public address changed). Failures are logged and left to the reconcile. */
export async function republishAgent(ctx: Ctx, agentId: string): Promise<void> {
  for (const w of await wantedRecords(ctx.pool, agentId)) {
    await publishRecord(ctx, w.database_id).catch((err: unknown) =>
      ctx.log.warn("DNS record not moved yet; the reconcile retries", { database_id: w.database_id, error: err }),
    );
  }
}

/**
 * One reconcile pass: every live database's records as the server answers
 * them, compared with its agent's addresses and the TTL, re-published when
 * they differ (changed or lost behind our back); the stale ones removed.
 * Serialized across instances of the service (an advisory lock, singleton.ts;
 * a pass that finds it taken is skipped). Answers how many names were repaired.
 */
export async function reconcileRecords(ctx: Ctx): Promise<number> {
  const dns = ctx.dns;
  if (!dns) return 0;
  const repaired = await whileHolding(ctx.pool, "dns-reconcile", async () => {
    let repaired = 0;
    for (const w of await wantedRecords(ctx.pool)) {
      if (w.addresses.length === 0) continue;
      const ttl = recordTtl(dns, w);
      for (const name of namesOf(w.database_id, dns.domain)) {
        const answer = await dns.client.lookup(name);
        const ok =
          sameAddresses(
            answer.map((r) => r.address),
            w.addresses,
          ) && answer.every((r) => r.ttl === ttl);
        if (ok) continue;
        ctx.log.warn("DNS record differs from the database's place; repairing", {
          name,
          answered: answer.map((r) => r.address),
          wanted: w.addresses,
        });
        await publishRecord(ctx, w.database_id);
        repaired++;
        break;
      }
    }
    return repaired + (await removeStaleRecords(ctx));
  });
  return repaired ?? 0;
}
