import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { conflict, invalidArgument, notFound } from "@dbaas/kit";
import { AlertSchema, BillingService, PaymentMethodSchema } from "@dbaas/proto/billing";
import { record, T0, type StubState } from "./stub-state.ts";

/** Billing's rules for an alert (alerts-shared contract), so the gateway is seen passing its violations on. */
const MAX_ALERTS = 20;
const MAX_THRESHOLD = 1_000_000;

/** The test processor's tokens (Stripe's test cards): what it reports about the card each stands for. */
const TEST_CARDS: Record<string, { brand: string; last4: string }> = {
  tok_visa: { brand: "visa", last4: "4242" },
  tok_mastercard: { brand: "mastercard", last4: "4444" },
  tok_amex: { brand: "amex", last4: "8431" },
  tok_chargeCustomerFail: { brand: "visa", last4: "0341" },
};

/** The billing stub: in-memory payment methods, invoices and alerts, and billing's rules for them. */
export function billingRoutes(state: StubState) {
  const methodsOf = (org: string) => state.paymentMethods.filter((pm) => pm.organizationId === org);
  return (router: ConnectRouter) =>
    router.service(BillingService, {
      async addPaymentMethod(req) {
        record(state, "addPaymentMethod", req);
        const violations = [];
        if (req.type !== "card") violations.push({ field: "type", message: "must be one of: card" });
        const card = TEST_CARDS[req.token];
        if (!card) violations.push({ field: "token", message: "was declined by the payment processor: it is not a valid card token" });
        if (violations.length > 0) throw invalidArgument(violations);
        const pm = create(PaymentMethodSchema, {
          id: `pm-${state.paymentMethods.length + 1}`,
          organizationId: req.organizationId,
          type: "card",
          ...card,
          expMonth: 12,
          expYear: 2034,
          isDefault: methodsOf(req.organizationId).length === 0,
          createdAt: timestampFromDate(T0),
        });
        state.paymentMethods.push(pm);
        return { paymentMethod: pm };
      },
      async listPaymentMethods(req) {
        return { paymentMethods: methodsOf(req.organizationId) };
      },
      async updatePaymentMethod(req) {
        record(state, "updatePaymentMethod", req);
        const methods = methodsOf(req.organizationId);
        const pm = methods.find((m) => m.id === req.id);
        if (!pm) throw notFound("payment method");
        if (req.isDefault === false && pm.isDefault) {
          throw invalidArgument([{ field: "default", message: "make another payment method the default instead" }]);
        }
        if (req.isDefault === true) for (const m of methods) m.isDefault = m === pm;
        return { paymentMethod: pm };
      },
      async deletePaymentMethod(req) {
        record(state, "deletePaymentMethod", req);
        const methods = methodsOf(req.organizationId);
        const pm = methods.find((m) => m.id === req.id);
        if (!pm) throw notFound("payment method");
        if (pm.isDefault && methods.length > 1) throw conflict("make another payment method the default first");
        state.paymentMethods.splice(state.paymentMethods.indexOf(pm), 1);
        return {};
      },
      async getStanding(req) {
        return { hasDefaultPaymentMethod: methodsOf(req.organizationId).some((m) => m.isDefault) };
      },
      async listInvoices(req) {
        record(state, "listInvoices", req);
        const invoices = state.invoices.map((i) => i.invoice).filter((inv) => inv.organizationId === req.organizationId);
        return { invoices: invoices.sort((a, b) => b.period.localeCompare(a.period)) };
      },
      async getInvoicePdf(req) {
        record(state, "getInvoicePdf", req);
        const found = state.invoices.find((i) => i.invoice.id === req.id && i.invoice.organizationId === req.organizationId);
        if (!found) throw notFound("invoice");
        return { pdf: found.pdf, filename: found.filename };
      },
      async createAlert(req) {
        record(state, "createAlert", req);
        const violations = [];
        if (!(req.threshold > 0)) violations.push({ field: "threshold", message: "must be greater than 0" });
        else if (!(req.threshold <= MAX_THRESHOLD)) violations.push({ field: "threshold", message: `must be at most ${MAX_THRESHOLD}` });
        if (req.currency !== "USD") violations.push({ field: "currency", message: "must be one of: USD" });
        if (req.channels.length === 0) violations.push({ field: "channels", message: "must list at least one channel" });
        else if (req.channels.some((c) => c !== "email")) violations.push({ field: "channels", message: "must each be one of: email" });
        else if (new Set(req.channels).size !== req.channels.length)
          violations.push({ field: "channels", message: "must not repeat a channel" });
        if (violations.length > 0) throw invalidArgument(violations);
        if (state.alerts.filter((a) => a.organizationId === req.organizationId).length >= MAX_ALERTS) {
          throw conflict(`an organization can have at most ${MAX_ALERTS} alerts`);
        }
        const alert = create(AlertSchema, {
          id: `alr-${state.alerts.length + 1}`,
          organizationId: req.organizationId,
          threshold: req.threshold,
          currency: req.currency,
          channels: req.channels,
          createdAt: timestampFromDate(T0),
        });
        state.alerts.push(alert);
        return { alert };
      },
      async listAlerts(req) {
        record(state, "listAlerts", req);
        return { alerts: state.alerts.filter((a) => a.organizationId === req.organizationId) };
      },
      async deleteAlert(req) {
        record(state, "deleteAlert", req);
        const i = state.alerts.findIndex((a) => a.id === req.id && a.organizationId === req.organizationId);
        if (i < 0) throw notFound("alert");
        state.alerts.splice(i, 1);
        return {};
      },
      async recordStatusEvents() {
        return { recorded: 0 };
      },
      async getUsage(req) {
        record(state, "getUsage", req);
        return {
          periodStart: timestampFromDate(new Date("2025-03-01T00:00:00Z")),
          periodEnd: timestampFromDate(new Date("2025-04-01T00:00:00Z")),
          computeHours: { quantity: 10.5, amount: 0.21 },
          storageGb: { quantity: 2, amount: 0.25 },
          dataTransferGb: { quantity: 120, amount: 1 },
          total: 1.46,
          currency: "USD",
        };
      },
    });
}
