import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { notFound, Validator, withTransaction } from "@dbaas/kit";
import { NotifyOrganizationResponseSchema, type NotifyOrganizationRequest, type NotifyOrganizationResponse } from "@dbaas/proto/identity";
import { ROLE_NAMES, roleScopes, SCOPES, type Scope } from "../authz.ts";
import type { AppContext } from "../context.ts";
import { memberEmails } from "../db/memberships.ts";
import { findNotification, recordNotification } from "../db/notifications.ts";
import { organizationExists } from "../db/organizations.ts";
import { enqueueMail } from "../mail.ts";
import { checkRequired } from "../validation.ts";

const NOTIFICATION_ID_MAX = 200;
const SUBJECT_MAX = 200;
const TEXT_MAX = 10_000;

// \p{C}: control, format, private-use and unassigned code points; none of them prints.
const UNPRINTABLE = /\p{C}/u;
// A subject becomes a mail header: one line, no control characters.
const NOT_ONE_LINE = /[\p{Cc}\u2028\u2029]/u;

const chars = (s: string) => [...s].length;

/** Adds a violation unless `value` has 1 to `max` characters, not all blank; returns whether it has. */
function checkLength(v: Validator, field: string, value: string, max: number): boolean {
  if (value.trim() === "") {
    v.add(field, "is required");
    return false;
  }
  if (chars(value) > max) {
    v.add(field, `must be at most ${max} characters`);
    return false;
  }
  return true;
}

/** The roles whose members hold `permission`, as authz.ts grants it. */
function rolesWith(permission: Scope) {
  return ROLE_NAMES.filter((role) => roleScopes(role).includes(permission));
}

export function notifyOrganization(ctx: AppContext) {
  return async (req: NotifyOrganizationRequest): Promise<NotifyOrganizationResponse> => {
    const v = new Validator();
    checkRequired(v, "organization_id", req.organizationId);
    if (checkLength(v, "notification_id", req.notificationId, NOTIFICATION_ID_MAX) && UNPRINTABLE.test(req.notificationId)) {
      v.add("notification_id", "must consist of printable characters");
    }
    v.oneOf("permission", req.permission, SCOPES);
    if (checkLength(v, "subject", req.subject, SUBJECT_MAX) && NOT_ONE_LINE.test(req.subject)) {
      v.add("subject", "must be one line without control characters");
    }
    checkLength(v, "text", req.text, TEXT_MAX);
    v.throwIfAny();

    const now = ctx.clock.now();
    const outcome = await withTransaction(ctx.pool, async (db) => {
      if (!(await organizationExists(db, req.organizationId))) throw notFound("organization");
      const recipients = await memberEmails(db, req.organizationId, rolesWith(req.permission as Scope));
      // A concurrent call with the same id waits here until the first commits
      // (then finds its row) or rolls back (then takes its place).
      const recorded = await recordNotification(db, {
        id: req.notificationId,
        organizationId: req.organizationId,
        recipients: recipients.length,
        now,
      });
      if (!recorded) {
        const row = await findNotification(db, req.notificationId);
        // Gone again only if its organization was deleted meanwhile.
        if (!row) throw notFound("organization");
        if (row.organization_id !== req.organizationId) {
          throw new ConnectError("notification_id was already used for another organization", Code.AlreadyExists);
        }
        return { recipients: row.recipients, queued: false };
      }
      for (const email of recipients) {
        await enqueueMail(db, ctx.sealer, { to: email, subject: req.subject, text: req.text }, now);
      }
      return { recipients: recipients.length, queued: true };
    });
    if (outcome.queued) {
      if (outcome.recipients > 0) ctx.mailRelay.nudge();
      ctx.log.info("organization notified", {
        organization_id: req.organizationId,
        notification_id: req.notificationId,
        permission: req.permission,
        recipients: outcome.recipients,
      });
    }
    return create(NotifyOrganizationResponseSchema, { recipients: outcome.recipients });
  };
}
