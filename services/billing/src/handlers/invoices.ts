import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { notFound, Validator } from "@dbaas/kit";
import {
  GetInvoicePdfResponseSchema,
  InvoiceLineSchema,
  InvoiceSchema,
  ListInvoicesResponseSchema,
  type GetInvoicePdfRequest,
  type GetInvoicePdfResponse,
  type Invoice,
  type ListInvoicesRequest,
  type ListInvoicesResponse,
} from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { findInvoice, listInvoices as listRecords, type InvoiceRecord } from "../db/invoices.ts";
import { invoiceFilename, invoicePdf } from "../invoices/pdf.ts";
import { checkOrganizationId } from "../validation.ts";

function invoiceToProto(r: InvoiceRecord): Invoice {
  return create(InvoiceSchema, {
    id: r.id,
    organizationId: r.organizationId,
    period: r.period,
    amount: r.amountCents / 100,
    currency: r.currency,
    status: r.status,
    issuedAt: timestampFromDate(r.issuedAt),
    dueAt: timestampFromDate(r.dueAt),
    paidAt: r.paidAt ? timestampFromDate(r.paidAt) : undefined,
    lines: r.lines.map((l) =>
      create(InvoiceLineSchema, { description: l.description, quantity: l.quantity, unit: l.unit, amount: l.amountCents / 100 }),
    ),
  });
}

export function listInvoices(ctx: AppContext) {
  return async (req: ListInvoicesRequest): Promise<ListInvoicesResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.throwIfAny();
    const records = await listRecords(ctx.pool, req.organizationId);
    return create(ListInvoicesResponseSchema, { invoices: records.map(invoiceToProto) });
  };
}

/** Rendered on each request from the stored invoice: the status and paid date are always current. */
export function getInvoicePdf(ctx: AppContext) {
  return async (req: GetInvoicePdfRequest): Promise<GetInvoicePdfResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    if (req.id === "") v.add("id", "is required");
    v.throwIfAny();
    const record = await findInvoice(ctx.pool, req.organizationId, req.id);
    if (!record) throw notFound("invoice");
    return create(GetInvoicePdfResponseSchema, { pdf: invoicePdf(record), filename: invoiceFilename(record) });
  };
}
