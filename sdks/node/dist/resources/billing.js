import { bytes, data, none, paged, Resource, seg } from "./base.js";
/** Usage, invoices, payment methods and spending alerts: `client.billing`. */
export class Billing extends Resource {
    /** Month-to-date usage and its price. */
    getUsage(opts) {
        return data(this, "GET", "/v1/billing/usage", undefined, opts);
    }
    /** Invoices, newest period first. */
    listInvoices(query, opts) {
        return paged(this, "/v1/billing/invoices", "invoices", query, opts);
    }
    /** An invoice as a PDF document. */
    getInvoicePdf(invoiceId, opts) {
        return bytes(this, `/v1/billing/invoices/${seg(invoiceId)}/pdf`, opts);
    }
    listPaymentMethods(query, opts) {
        return paged(this, "/v1/billing/payment-methods", "payment_methods", query, opts);
    }
    /** Adds a card from a payment processor token; the first one becomes the default. */
    addPaymentMethod(body, opts) {
        return data(this, "POST", "/v1/billing/payment-methods", body, opts);
    }
    /** Makes a payment method the default. */
    updatePaymentMethod(id, body, opts) {
        return data(this, "PATCH", `/v1/billing/payment-methods/${seg(id)}`, body, opts);
    }
    deletePaymentMethod(id, opts) {
        return none(this, "DELETE", `/v1/billing/payment-methods/${seg(id)}`, opts);
    }
    listAlerts(query, opts) {
        return paged(this, "/v1/billing/alerts", "alerts", query, opts);
    }
    /** A spending alert: fires once the month-to-date total reaches `threshold`. */
    createAlert(body, opts) {
        return data(this, "POST", "/v1/billing/alerts", body, opts);
    }
    deleteAlert(alertId, opts) {
        return none(this, "DELETE", `/v1/billing/alerts/${seg(alertId)}`, opts);
    }
}
/** What a database can be created with: `client.catalogue`. */
export class Catalogue extends Resource {
    listRegions(opts) {
        return data(this, "GET", "/v1/regions", undefined, opts);
    }
    /** Instance tiers and their hourly prices (USD). */
    listTiers(opts) {
        return data(this, "GET", "/v1/tiers", undefined, opts);
    }
    listVersions(opts) {
        return data(this, "GET", "/v1/versions", undefined, opts);
    }
}
