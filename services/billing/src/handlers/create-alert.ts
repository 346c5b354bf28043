import { create } from "@bufbuild/protobuf";
import { conflict, newId, Validator, withTransaction } from "@dbaas/kit";
import { ALERT_CHANNELS, CURRENCY } from "@dbaas/catalogue";
import { CreateAlertResponseSchema, type CreateAlertRequest, type CreateAlertResponse } from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { countAlerts, insertAlert, lockAlerts, type AlertRow } from "../db/alerts.ts";
import { checkOrganizationId } from "../validation.ts";
import { alertToProto } from "./alerts.ts";

const MAX_THRESHOLD = 1_000_000;
/** Each alert is a month-to-date total read per check; the cap bounds that work per organization. */
export const MAX_ALERTS_PER_ORGANIZATION = 20;

function checkAlert(v: Validator, req: CreateAlertRequest): void {
  checkOrganizationId(v, req.organizationId);
  // Written so that NaN fails too.
  if (!(req.threshold > 0)) v.add("threshold", "must be greater than 0");
  else if (!(req.threshold <= MAX_THRESHOLD)) v.add("threshold", `must be at most ${MAX_THRESHOLD}`);
  v.oneOf("currency", req.currency, [CURRENCY]);
  if (req.channels.length === 0) v.add("channels", "must list at least one channel");
  else if (req.channels.some((c) => !(ALERT_CHANNELS as readonly string[]).includes(c)))
    v.add("channels", `must each be one of: ${ALERT_CHANNELS.join(", ")}`);
  else if (new Set(req.channels).size !== req.channels.length) v.add("channels", "must not repeat a channel");
}

/**
 * Stores a spending alert; the background check fires it (services/billing/src/alerts).
 * The count and the insert share a per-organization lock, so concurrent
 * requests cannot take an organization past the cap.
 */
export function createAlert(ctx: AppContext) {
  return async (req: CreateAlertRequest): Promise<CreateAlertResponse> => {
    const v = new Validator();
    checkAlert(v, req);
    v.throwIfAny();

    const row: AlertRow = {
      id: newId("alr"),
      organization_id: req.organizationId,
      threshold: req.threshold,
      currency: req.currency,
      channels: req.channels,
      created_at: ctx.clock.now(),
    };
    await withTransaction(ctx.pool, async (db) => {
      await lockAlerts(db, req.organizationId);
      if ((await countAlerts(db, req.organizationId)) >= MAX_ALERTS_PER_ORGANIZATION) {
        throw conflict(`an organization can have at most ${MAX_ALERTS_PER_ORGANIZATION} alerts`);
      }
      await insertAlert(db, row);
    });
    ctx.log.info("alert created", { organization_id: row.organization_id, alert_id: row.id, threshold: row.threshold });
    return create(CreateAlertResponseSchema, { alert: alertToProto(row) });
  };
}
