import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
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

/** How long identity may take to say the organization's name before the invoice goes out with its id only. */
const NAME_TIMEOUT_MS = 2_000;

/**
 * The organization's name as identity has it, for the invoice's "Customer" line. The invoice
 * is complete without it (the organization id is always on it), so without IDENTITY_URL, or
 * when identity cannot say, the PDF is served without the name rather than not at all.
 */
async function organizationName(ctx: AppContext, organizationId: string): Promise<string | undefined> {
  if (!ctx.identity) return undefined;
  try {
    const res = await ctx.identity.getOrganization({ organizationId }, { timeoutMs: NAME_TIMEOUT_MS });
    return res.organization?.name || undefined;
  } catch (err) {
    if (ConnectError.from(err).code !== Code.NotFound) {
      ctx.log.warn("could not ask identity for the organization's name; the invoice shows its id only", {
        organization_id: organizationId,
        error: err,
      });
    }
    return undefined;
  }
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
    const pdf = await invoicePdf(record, await organizationName(ctx, record.organizationId));
    return create(GetInvoicePdfResponseSchema, { pdf, filename: invoiceFilename(record) });
  };
}
