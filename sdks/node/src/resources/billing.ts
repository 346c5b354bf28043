import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, Schemas } from "../types.ts";
import { bytes, data, none, paged, Resource, seg } from "./base.ts";

/** Usage, invoices, payment methods and spending alerts: `client.billing`. */
export class Billing extends Resource {
  /** Month-to-date usage and its price. */
  getUsage(opts?: RequestOptions): Promise<Schemas["Usage"]> {
    return data(this, "GET", "/v1/billing/usage", undefined, opts);
  }

  /** Invoices, newest period first. */
  listInvoices(query?: Query<"listInvoices">, opts?: RequestOptions): PageIterator<Schemas["Invoice"]> {
    return paged(this, "/v1/billing/invoices", "invoices", query, opts);
  }

  /** An invoice as a PDF document. */
  getInvoicePdf(invoiceId: string, opts?: RequestOptions): Promise<Uint8Array> {
    return bytes(this, `/v1/billing/invoices/${seg(invoiceId)}/pdf`, opts);
  }

  listPaymentMethods(query?: Query<"listPaymentMethods">, opts?: RequestOptions): PageIterator<Schemas["PaymentMethod"]> {
    return paged(this, "/v1/billing/payment-methods", "payment_methods", query, opts);
  }

  /** Adds a card from a payment processor token; the first one becomes the default. */
  addPaymentMethod(body: Body<"addPaymentMethod">, opts?: RequestOptions): Promise<Schemas["PaymentMethod"]> {
    return data(this, "POST", "/v1/billing/payment-methods", body, opts);
  }

  /** Makes a payment method the default. */
  updatePaymentMethod(id: string, body: Body<"updatePaymentMethod">, opts?: RequestOptions): Promise<Schemas["PaymentMethod"]> {
    return data(this, "PATCH", `/v1/billing/payment-methods/${seg(id)}`, body, opts);
  }

  deletePaymentMethod(id: string, opts?: RequestOptions): Promise<void> {
    return none(this, "DELETE", `/v1/billing/payment-methods/${seg(id)}`, opts);
  }

  listAlerts(query?: Query<"listAlerts">, opts?: RequestOptions): PageIterator<Schemas["Alert"]> {
    return paged(this, "/v1/billing/alerts", "alerts", query, opts);
  }

  /** A spending alert: fires once the month-to-date total reaches `threshold`. */
  createAlert(body: Body<"createAlert">, opts?: RequestOptions): Promise<Schemas["Alert"]> {
    return data(this, "POST", "/v1/billing/alerts", body, opts);
  }

  deleteAlert(alertId: string, opts?: RequestOptions): Promise<void> {
    return none(this, "DELETE", `/v1/billing/alerts/${seg(alertId)}`, opts);
  }
}

/** What a database can be created with: `client.catalogue`. */
export class Catalogue extends Resource {
  listRegions(opts?: RequestOptions): Promise<Schemas["Regions"]> {
    return data(this, "GET", "/v1/regions", undefined, opts);
  }

  /** Instance tiers and their hourly prices (USD). */
  listTiers(opts?: RequestOptions): Promise<Schemas["Tiers"]> {
    return data(this, "GET", "/v1/tiers", undefined, opts);
  }

  listVersions(opts?: RequestOptions): Promise<Schemas["Versions"]> {
    return data(this, "GET", "/v1/versions", undefined, opts);
  }
}
