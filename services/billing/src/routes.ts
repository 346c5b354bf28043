import type { ConnectRouter } from "@connectrpc/connect";
import { BillingService } from "@dbaas/proto/billing";
import type { AppContext } from "./context.ts";
import { deleteAlert, listAlerts } from "./handlers/alerts.ts";
import { createAlert } from "./handlers/create-alert.ts";
import { deletePaymentMethod } from "./handlers/delete-payment-method.ts";
import { getStanding } from "./handlers/get-standing.ts";
import { getUsage } from "./handlers/get-usage.ts";
import { getInvoicePdf, listInvoices } from "./handlers/invoices.ts";
import { addPaymentMethod, listPaymentMethods, updatePaymentMethod } from "./handlers/payment-methods.ts";
import { recordStatusEvents } from "./handlers/record-status-events.ts";
import { recordUsageSamples } from "./handlers/record-usage-samples.ts";

export const routes = (ctx: AppContext) => (router: ConnectRouter) =>
  router.service(BillingService, {
    recordStatusEvents: recordStatusEvents(ctx),
    recordUsageSamples: recordUsageSamples(ctx),
    getUsage: getUsage(ctx),
    addPaymentMethod: addPaymentMethod(ctx),
    listPaymentMethods: listPaymentMethods(ctx),
    updatePaymentMethod: updatePaymentMethod(ctx),
    getStanding: getStanding(ctx),
    listInvoices: listInvoices(ctx),
    getInvoicePdf: getInvoicePdf(ctx),
    createAlert: createAlert(ctx),
    listAlerts: listAlerts(ctx),
    deleteAlert: deleteAlert(ctx),
    deletePaymentMethod: deletePaymentMethod(ctx),
  });
