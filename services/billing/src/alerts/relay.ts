import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { Scope } from "@dbaas/catalogue";
import type { IdentityService } from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";
import { claimDueNotification, markAbandoned, markDelivered, markFailed } from "../db/alerts.ts";

/** Alerts go to the members who may read billing: those who can look at the usage the mail points to. */
const RECIPIENTS_PERMISSION: Scope = "billing:read";

/** Delay before the next attempt after `failures` failed ones: 10 s doubling, at most an hour. */
export function retryDelayMs(failures: number): number {
  return Math.min(10_000 * 2 ** (failures - 1), 3_600_000);
}

/**
 * How long a claimed notice counts as being sent. Past it, the relay that
 * claimed it is presumed dead and the notice goes out again. Far above the
 * call's timeout, so a live call is never doubled.
 */
export const SEND_LEASE_MS = 60_000;
const CALL_TIMEOUT_MS = 10_000;

type Outcome = "delivered" | "failed" | "abandoned" | "none";

/**
 * Hands the due alert notices to identity's NotifyOrganization, one at a
 * time. A notice is marked delivered only once identity answered; a failure
 * is retried with backoff, and a notice whose answer was lost, or whose relay
 * died before marking it, goes out again after its lease with the same
 * notification_id, which identity does not mail twice. An organization
 * identity no longer knows is given up on. Returns how many notices were
 * delivered.
 */
export async function relayAlertNotifications(
  ctx: AppContext,
  identity: Client<typeof IdentityService>,
  signal?: AbortSignal,
): Promise<number> {
  const sendOne = async (): Promise<Outcome> => {
    const claimedAt = ctx.clock.now();
    const n = await claimDueNotification(ctx.pool, claimedAt, new Date(claimedAt.getTime() + SEND_LEASE_MS));
    if (!n) return "none";
    const fields = { organization_id: n.organizationId, alert_id: n.alertId, notification_id: n.notificationId, attempts: n.attempts };
    let recipients: number;
    try {
      const answer = await identity.notifyOrganization(
        {
          organizationId: n.organizationId,
          notificationId: n.notificationId,
          permission: RECIPIENTS_PERMISSION,
          subject: n.subject,
          text: n.body,
        },
        { timeoutMs: CALL_TIMEOUT_MS },
      );
      recipients = answer.recipients;
    } catch (err) {
      const ce = ConnectError.from(err);
      if (ce.code === Code.NotFound) {
        await markAbandoned(ctx.pool, n.notificationId, ce.message, ctx.clock.now());
        ctx.log.warn("alert notice dropped: identity does not know the organization", { ...fields, error: ce });
        return "abandoned";
      }
      const retryAt = new Date(ctx.clock.now().getTime() + retryDelayMs(n.attempts));
      await markFailed(ctx.pool, n.notificationId, ce.message, retryAt);
      ctx.log.warn("alert notice not delivered; will retry", { ...fields, retry_at: retryAt, error: ce });
      return "failed";
    }
    await markDelivered(ctx.pool, n.notificationId, recipients, ctx.clock.now());
    ctx.log.info("alert notice delivered", { ...fields, recipients });
    return "delivered";
  };

  let delivered = 0;
  while (!signal?.aborted) {
    const outcome = await sendOne();
    if (outcome === "none") break;
    if (outcome === "delivered") delivered++;
  }
  return delivered;
}
