import { TOKEN_MAX_LENGTH } from "@dbaas/kit";
import { ALERT_CHANNELS, PAYMENT_METHOD_TYPES } from "@dbaas/catalogue";
import { Type } from "@sinclair/typebox";
import { created, file, noContent, ok, type Reply } from "../../middleware/envelope.ts";
import { body, CURRENCY_MAX_LENGTH, oneOf, optional, PAGINATION_QUERY, text, type Infer } from "../../schema.ts";
import { pageOf, present } from "../mappers.ts";
import { ALERT, INVOICE, PAYMENT_METHOD, USAGE } from "../responses-billing.ts";
import type { AuthedCall } from "../route.ts";

export const addPaymentMethodBody = body({
  type: oneOf(PAYMENT_METHOD_TYPES, "Kind of payment method."),
  token: text(TOKEN_MAX_LENGTH, "A payment token from the payment processor's client-side SDK; the card number never reaches us."),
});

export const updatePaymentMethodBody = body({
  default: optional(
    Type.Boolean({
      description: "true makes this the default payment method, the one invoices are charged to; the previous default stops being it.",
    }),
  ),
});

/** Room for channels to come; billing refuses repeats. */
const MAX_CHANNELS = 10;

export const createAlertBody = body({
  threshold: Type.Number({ description: "Month-to-date total at which the alert fires: more than 0, at most 1,000,000." }),
  currency: text(CURRENCY_MAX_LENGTH, "The catalogue's currency, `USD`."),
  channels: Type.Array(oneOf(ALERT_CHANNELS, "A channel."), {
    maxItems: MAX_CHANNELS,
    description: "How the organization is told, at least one, no repeats: `email` mails every member who may read billing.",
  }),
});

export const listQuery = PAGINATION_QUERY;

/** Month-to-date usage of the caller's organization (docs/product.md, Billing). */
export async function getUsage({ ctx, principal }: AuthedCall<unknown>): Promise<Reply> {
  const res = await ctx.billing.getUsage({ organizationId: principal.organizationId });
  return ok(USAGE.map(res));
}

export async function listPaymentMethods(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.billing.listPaymentMethods({ organizationId: call.principal.organizationId });
  return pageOf("payment_methods", res.paymentMethods, call.query, PAYMENT_METHOD.map);
}

/** 201 with the new method; an organization's first one becomes its default. */
export async function addPaymentMethod(call: AuthedCall<Infer<typeof addPaymentMethodBody>>): Promise<Reply> {
  const res = await call.ctx.billing.addPaymentMethod({
    organizationId: call.principal.organizationId,
    type: call.body.type,
    token: call.body.token,
  });
  return created(PAYMENT_METHOD.map(present(res.paymentMethod, "payment_method")));
}

export async function updatePaymentMethod(call: AuthedCall<Infer<typeof updatePaymentMethodBody>>): Promise<Reply> {
  // Billing names fields in its violations as the API does (`default`).
  const res = await call.ctx.billing.updatePaymentMethod({
    organizationId: call.principal.organizationId,
    id: call.params.id,
    isDefault: call.body.default,
  });
  return ok(PAYMENT_METHOD.map(present(res.paymentMethod, "payment_method")));
}

/**
 * 204. Any method but the default goes at once; the default only as the last
 * one and when nothing needs it: billing's 409 says what to do first.
 */
export async function deletePaymentMethod(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.billing.deletePaymentMethod({ organizationId: call.principal.organizationId, id: call.params.id });
  return noContent();
}

/** One invoice per month with usage: billing answers them all. */
export async function listInvoices(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.billing.listInvoices({ organizationId: call.principal.organizationId });
  return pageOf("invoices", res.invoices, call.query, (invoice) => INVOICE.map({ invoice, publicBaseUrl: call.ctx.config.publicBaseUrl }));
}

export async function getInvoicePdf(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.billing.getInvoicePdf({ organizationId: call.principal.organizationId, id: call.params.id });
  // A view of the decoded message's bytes, not a copy.
  const pdf = Buffer.from(res.pdf.buffer, res.pdf.byteOffset, res.pdf.byteLength);
  return file("application/pdf", res.filename, pdf);
}

/** 201 with the alert; billing judges the values (and the per-organization cap), its violations naming the public fields. */
export async function createAlert(call: AuthedCall<Infer<typeof createAlertBody>>): Promise<Reply> {
  const res = await call.ctx.billing.createAlert({
    organizationId: call.principal.organizationId,
    threshold: call.body.threshold,
    currency: call.body.currency,
    channels: call.body.channels,
  });
  return created(ALERT.map(present(res.alert, "alert")));
}

/** At most 20 per organization (billing's cap), oldest first. */
export async function listAlerts(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.billing.listAlerts({ organizationId: call.principal.organizationId });
  return pageOf("alerts", res.alerts, call.query, ALERT.map);
}

/** 204; the alert never fires again. */
export async function deleteAlert(call: AuthedCall<unknown>): Promise<Reply> {
  await call.ctx.billing.deleteAlert({ organizationId: call.principal.organizationId, id: call.params.id });
  return noContent();
}
