import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, Schemas } from "../types.ts";
import { Resource } from "./base.ts";
/** Usage, invoices, payment methods and spending alerts: `client.billing`. */
export declare class Billing extends Resource {
    /** Month-to-date usage and its price. */
    getUsage(opts?: RequestOptions): Promise<Schemas["Usage"]>;
    /** Invoices, newest period first. */
    listInvoices(query?: Query<"listInvoices">, opts?: RequestOptions): PageIterator<Schemas["Invoice"]>;
    /** An invoice as a PDF document. */
    getInvoicePdf(invoiceId: string, opts?: RequestOptions): Promise<Uint8Array>;
    listPaymentMethods(query?: Query<"listPaymentMethods">, opts?: RequestOptions): PageIterator<Schemas["PaymentMethod"]>;
    /** Adds a card from a payment processor token; the first one becomes the default. */
    addPaymentMethod(body: Body<"addPaymentMethod">, opts?: RequestOptions): Promise<Schemas["PaymentMethod"]>;
    /** Makes a payment method the default. */
    updatePaymentMethod(id: string, body: Body<"updatePaymentMethod">, opts?: RequestOptions): Promise<Schemas["PaymentMethod"]>;
    deletePaymentMethod(id: string, opts?: RequestOptions): Promise<void>;
    listAlerts(query?: Query<"listAlerts">, opts?: RequestOptions): PageIterator<Schemas["Alert"]>;
    /** A spending alert: fires once the month-to-date total reaches `threshold`. */
    createAlert(body: Body<"createAlert">, opts?: RequestOptions): Promise<Schemas["Alert"]>;
    deleteAlert(alertId: string, opts?: RequestOptions): Promise<void>;
}
/** What a database can be created with: `client.catalogue`. */
export declare class Catalogue extends Resource {
    listRegions(opts?: RequestOptions): Promise<Schemas["Regions"]>;
    /** Instance tiers and their hourly prices (USD). */
    listTiers(opts?: RequestOptions): Promise<Schemas["Tiers"]>;
    listVersions(opts?: RequestOptions): Promise<Schemas["Versions"]>;
}
