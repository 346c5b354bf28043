import { Code, ConnectError } from "@connectrpc/connect";
import { tierByName } from "@dbaas/catalogue";
import type pg from "pg";
import type { AppContext } from "./context.ts";
import { notifyAgent } from "./db/notify.ts";
import { claimStorageNotices, markNotified, recordStorageOperation } from "./db/operations.ts";
import type { NewSample } from "./db/samples.ts";

/**
 * Storage per tier (docs/product.md, Tenant isolation on an agent host): a database whose data
 * directory reaches 100 % of its tier's storage turns read-only, below 95 %
 * (a resize to a larger tier, data dropped) it is writable again. This
 * service decides, from the agent's samples, as it owns the database's state
 * and operations: it records `storage_full` / `storage_ok`, sets the spec's
 * `read_only` (the agent applies `default_transaction_read_only`), and mails
 * the organization's owners and admins through identity.
 */

/** At this share of the tier's storage a database turns read-only. */
export const FULL_AT = 1;
/** Below this share it is writable again. */
export const WRITABLE_BELOW = 0.95;
/** The catalogue's GB, as billing counts them. */
export const BYTES_PER_GB = 1_000_000_000;
/** Who gets the mail: members whose role holds this permission (owners and admins). */
const RECIPIENTS_PERMISSION = "members:write";

/** Bytes of storage tier `tier` gives (TEST_STORAGE_BYTES_PER_GB shrinks every tier alike, for tests). */
export function storageLimitBytes(ctx: Pick<AppContext, "cfg">, tier: string): number {
  const gb = tierByName(tier)?.storageGb ?? 0;
  return gb * (ctx.cfg.testStorageBytesPerGb ?? BYTES_PER_GB);
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

/**
 * The newest of the fresh samples of each database decides whether it is
 * full: a transition records its operation (with a mail pending) and wakes
 * its agent. Replicas are left alone (read-only anyway, billed by the hour).
 * Runs in the samples' transaction.
 */
export async function applyStorageSamples(ctx: AppContext, db: pg.ClientBase, fresh: readonly NewSample[]): Promise<void> {
  const newest = new Map<string, NewSample>();
  for (const s of fresh) {
    if (!s.billable) continue;
    const seen = newest.get(s.database_id);
    if (!seen || s.sampled_at > seen.sampled_at) newest.set(s.database_id, s);
  }
  for (const s of newest.values()) {
    const { rows } = await db.query<{ tier: string; storage_full: boolean; agent_id: string }>(
      "SELECT tier, storage_full, agent_id FROM databases WHERE id = $1 AND deleted_at IS NULL AND primary_id IS NULL FOR UPDATE",
      [s.database_id],
    );
    const row = rows[0];
    if (!row) continue;
    const used = Number(s.storage_bytes);
    const limit = storageLimitBytes(ctx, row.tier);
    if (limit <= 0) continue;
    let full: boolean;
    if (!row.storage_full && used >= limit * FULL_AT) full = true;
    else if (row.storage_full && used < limit * WRITABLE_BELOW) full = false;
    else continue;
    await db.query("UPDATE databases SET storage_full = $2, updated_at = now() WHERE id = $1", [s.database_id, full]);
    const what = `${mb(used)} of the ${row.tier} tier's ${mb(limit)}`;
    await recordStorageOperation(db, s.database_id, full ? "storage_full" : "storage_ok", what);
    await notifyAgent(db, row.agent_id);
    ctx.log[full ? "warn" : "info"](full ? "storage full; database made read-only" : "storage below 95 %; database writable again", {
      database_id: s.database_id,
      storage_bytes: used,
      limit_bytes: limit,
    });
  }
}

/** The mail of one storage operation. */
function notice(n: { type: string; database_id: string; name: string; detail: string }): { subject: string; text: string } {
  if (n.type === "storage_full") {
    return {
      subject: `Database ${n.name} is full and read-only`,
      text: [
        `Your database ${n.name} (${n.database_id}) uses ${n.detail}: it has been made read-only.`,
        "",
        "To make room, delete data in a session that allows writes again:",
        "  SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE;",
        "then drop or truncate what you no longer need, or resize the database to a larger tier.",
        "It becomes writable again once it uses less than 95 % of its tier's storage.",
      ].join("\n"),
    };
  }
  return {
    subject: `Database ${n.name} is writable again`,
    text: `Your database ${n.name} (${n.database_id}) uses ${n.detail} and accepts writes again.`,
  };
}

/**
 * Sends the pending storage mails through identity's NotifyOrganization, one
 * at a time, each under its operation's id (identity mails an id once, so a
 * crash between its answer and the mark here never mails twice). Returns how
 * many were handed over; throws on the first that identity did not take.
 */
export async function relayStorageNoticesOnce(ctx: AppContext): Promise<number> {
  const pending = await claimStorageNotices(ctx.pool, 20);
  let sent = 0;
  for (const n of pending) {
    const { subject, text } = notice(n);
    try {
      await ctx.identity.notifyOrganization(
        { organizationId: n.organization_id, notificationId: n.id, permission: RECIPIENTS_PERMISSION, subject, text },
        { timeoutMs: 10_000 },
      );
    } catch (err) {
      // An organization deleted meanwhile has nobody to tell.
      if (ConnectError.from(err).code !== Code.NotFound) throw err;
    }
    await markNotified(ctx.pool, n.id);
    sent++;
  }
  return sent;
}
