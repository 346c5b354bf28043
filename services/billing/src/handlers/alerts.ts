import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { notFound, Validator, withTransaction } from "@dbaas/kit";
import {
  AlertSchema,
  DeleteAlertResponseSchema,
  ListAlertsResponseSchema,
  type Alert,
  type DeleteAlertRequest,
  type DeleteAlertResponse,
  type ListAlertsRequest,
  type ListAlertsResponse,
} from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { listAlerts as listRows, lockAlerts, removeAlert, type AlertRow } from "../db/alerts.ts";
import { checkOrganizationId } from "../validation.ts";

export function alertToProto(row: AlertRow): Alert {
  return create(AlertSchema, {
    id: row.id,
    organizationId: row.organization_id,
    threshold: row.threshold,
    currency: row.currency,
    channels: row.channels,
    createdAt: timestampFromDate(row.created_at),
  });
}

/** The organization's alerts, oldest first; at most MAX_ALERTS_PER_ORGANIZATION, so one page of them. */
export function listAlerts(ctx: AppContext) {
  return async (req: ListAlertsRequest): Promise<ListAlertsResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.throwIfAny();
    const rows = await listRows(ctx.pool, req.organizationId);
    return create(ListAlertsResponseSchema, { alerts: rows.map(alertToProto) });
  };
}

/**
 * Removes an alert for good. Under the organization's alert lock, which the
 * check takes to fire, so once this answers no check fires it again; a notice
 * of an earlier firing not delivered yet is dropped with it.
 */
export function deleteAlert(ctx: AppContext) {
  return async (req: DeleteAlertRequest): Promise<DeleteAlertResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    if (req.id === "") v.add("id", "is required");
    v.throwIfAny();
    const removed = await withTransaction(ctx.pool, async (db) => {
      await lockAlerts(db, req.organizationId);
      return await removeAlert(db, req.organizationId, req.id, ctx.clock.now());
    });
    if (!removed) throw notFound("alert");
    ctx.log.info("alert removed", { organization_id: req.organizationId, alert_id: req.id });
    return create(DeleteAlertResponseSchema, {});
  };
}
