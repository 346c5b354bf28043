import { ID } from "./ids.ts";
import { fileOf, json, listOf, NO_CONTENT, protectedRoute, type Route } from "./route.ts";
import * as billing from "./v1/billing.ts";

/**
 * The billing part of the route table (table.ts): usage, payment methods,
 * invoices and spending alerts. Reading needs billing:read (owner, admin);
 * anything that changes what is charged, or how the organization is told,
 * billing:write (owner).
 */
export const BILLING_ROUTES: readonly Route[] = [
  protectedRoute({
    method: "GET",
    path: "/v1/billing/usage",
    summary: "Month-to-date usage and its price.",
    permission: "billing:read",
    response: json(200, "Usage"),
    handler: billing.getUsage,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/billing/payment-methods",
    summary: "List the organization's payment methods, oldest first.",
    permission: "billing:read",
    response: listOf("payment_methods", "PaymentMethod"),
    query: billing.listQuery,
    handler: billing.listPaymentMethods,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/billing/payment-methods",
    summary: "Add a card from a payment processor token; the organization's first payment method becomes its default.",
    permission: "billing:write",
    response: json(201, "PaymentMethod"),
    body: billing.addPaymentMethodBody,
    handler: billing.addPaymentMethod,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/billing/payment-methods/:id",
    params: { id: ID.paymentMethod },
    summary: "Make a payment method the default (the previous default stops being it).",
    permission: "billing:write",
    response: json(200, "PaymentMethod"),
    body: billing.updatePaymentMethodBody,
    handler: billing.updatePaymentMethod,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/billing/payment-methods/:id",
    params: { id: ID.paymentMethod },
    summary:
      "Remove a payment method; the processor lets go of the card. The default only when it is the last one and nothing needs it " +
      "(409 while another method exists, a database beyond the free allowance runs, or the plan is paid).",
    permission: "billing:write",
    response: NO_CONTENT,
    errors: [409],
    handler: billing.deletePaymentMethod,
  }),

  protectedRoute({
    method: "GET",
    path: "/v1/billing/invoices",
    summary: "List the organization's invoices, newest period first: one per calendar month (UTC) with usage, issued after it ended.",
    permission: "billing:read",
    response: listOf("invoices", "Invoice"),
    query: billing.listQuery,
    handler: billing.listInvoices,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/billing/invoices/:id/pdf",
    params: { id: ID.invoice },
    summary: "An invoice as a PDF document.",
    permission: "billing:read",
    response: fileOf("application/pdf"),
    handler: billing.getInvoicePdf,
  }),

  protectedRoute({
    method: "POST",
    path: "/v1/billing/alerts",
    summary:
      "Set a spending alert: once per calendar month (UTC), when the month-to-date total reaches the threshold, the organization is told through the channels.",
    permission: "billing:write",
    response: json(201, "Alert"),
    body: billing.createAlertBody,
    handler: billing.createAlert,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/billing/alerts",
    summary: "List the organization's spending alerts, oldest first.",
    permission: "billing:read",
    response: listOf("alerts", "Alert"),
    query: billing.listQuery,
    handler: billing.listAlerts,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/billing/alerts/:id",
    params: { id: ID.alert },
    summary: "Remove a spending alert; it never fires again.",
    permission: "billing:write",
    response: NO_CONTENT,
    handler: billing.deleteAlert,
  }),
];
