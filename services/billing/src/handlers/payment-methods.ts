import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { dependencyUnavailable, invalidArgument, newId, notFound, Validator, withTransaction } from "@dbaas/kit";
import {
  AddPaymentMethodResponseSchema,
  ListPaymentMethodsResponseSchema,
  PaymentMethodSchema,
  UpdatePaymentMethodResponseSchema,
  type AddPaymentMethodRequest,
  type AddPaymentMethodResponse,
  type ListPaymentMethodsRequest,
  type ListPaymentMethodsResponse,
  type PaymentMethod,
  type UpdatePaymentMethodRequest,
  type UpdatePaymentMethodResponse,
} from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import {
  ensureCustomer,
  findPaymentMethod,
  insertPaymentMethod,
  listPaymentMethods as listRows,
  lockPaymentMethods,
  makeDefault,
  type PaymentMethodRow,
} from "../db/payment-methods.ts";
import { chargePastDueInvoices } from "../invoices/charge.ts";
import { ProcessorError } from "../processor/processor.ts";
import { checkOrganizationId } from "../validation.ts";

const PAYMENT_METHOD_TYPES = ["card"];
// Processors' tokens are short ASCII ids (`tok_…`); the bound keeps junk away from the processor.
const TOKEN_PATTERN = /^[\x21-\x7e]{1,255}$/;

function paymentMethodToProto(row: PaymentMethodRow): PaymentMethod {
  return create(PaymentMethodSchema, {
    id: row.id,
    organizationId: row.organization_id,
    type: row.type,
    brand: row.brand,
    last4: row.last4,
    expMonth: row.exp_month,
    expYear: row.exp_year,
    isDefault: row.is_default,
    createdAt: timestampFromDate(row.created_at),
  });
}

/**
 * Runs a processor call; its failures are not the caller's fault, so their
 * detail goes to the log and the caller learns only whether trying again may help.
 */
async function askProcessor<T>(ctx: AppContext, organizationId: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof ProcessorError)) throw err;
    ctx.log.error("payment processor call failed", {
      organization_id: organizationId,
      processor: ctx.processor.name,
      retryable: err.retryable,
      error: err,
    });
    throw err.retryable
      ? dependencyUnavailable("the payment processor is not reachable; try again shortly")
      : new ConnectError("the payment processor refused the request", Code.Internal);
  }
}

/**
 * Hands the token to the processor, then stores what it reports. The token
 * itself is neither stored nor logged. The processor is asked outside any
 * transaction; only the insert, which decides the default, is serialised per
 * organization. A new default is then charged the organization's past-due
 * invoices, after the commit; that charge's failures are logged, not answered.
 */
export function addPaymentMethod(ctx: AppContext) {
  return async (req: AddPaymentMethodRequest): Promise<AddPaymentMethodResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.oneOf("type", req.type, PAYMENT_METHOD_TYPES);
    if (req.token === "") v.add("token", "is required");
    else if (!TOKEN_PATTERN.test(req.token)) v.add("token", "must be 1-255 printable characters without spaces");
    v.throwIfAny();

    const org = req.organizationId;
    const { processor } = ctx;
    const result = await askProcessor(ctx, org, async () => {
      const customer = await ensureCustomer(ctx.pool, processor.name, org, () => processor.createCustomer(org));
      return await processor.attachCard(customer, req.token);
    });
    if (!result.accepted) {
      ctx.log.info("payment method declined by the processor", { organization_id: org, processor: processor.name, reason: result.reason });
      throw invalidArgument(
        [{ field: "token", message: `was declined by the payment processor: ${result.reason}` }],
        "the payment processor declined the token",
      );
    }

    const row = await withTransaction(ctx.pool, async (db) => {
      await lockPaymentMethods(db, org);
      return await insertPaymentMethod(db, {
        id: newId("pm"),
        organizationId: org,
        processor: processor.name,
        card: result.card,
        createdAt: ctx.clock.now(),
      });
    });
    ctx.log.info("payment method added", {
      organization_id: org,
      payment_method_id: row.id,
      brand: row.brand,
      is_default: row.is_default,
    });
    // Only a new default changes what a past-due invoice would be charged to.
    if (row.is_default) await chargePastDueInvoices(ctx, org);
    return create(AddPaymentMethodResponseSchema, { paymentMethod: paymentMethodToProto(row) });
  };
}

export function listPaymentMethods(ctx: AppContext) {
  return async (req: ListPaymentMethodsRequest): Promise<ListPaymentMethodsResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    v.throwIfAny();
    const rows = await listRows(ctx.pool, req.organizationId);
    return create(ListPaymentMethodsResponseSchema, { paymentMethods: rows.map(paymentMethodToProto) });
  };
}

/**
 * Switches the default: the old default stops being it in the same
 * transaction. A default is only ever replaced, never cleared, so an
 * organization that had one keeps one. The new default is then charged the
 * past-due invoices, as after an add.
 */
export function updatePaymentMethod(ctx: AppContext) {
  return async (req: UpdatePaymentMethodRequest): Promise<UpdatePaymentMethodResponse> => {
    const v = new Validator();
    checkOrganizationId(v, req.organizationId);
    if (req.id === "") v.add("id", "is required");
    v.throwIfAny();

    const org = req.organizationId;
    const { row, changed } = await withTransaction(ctx.pool, async (db) => {
      await lockPaymentMethods(db, org);
      const found = await findPaymentMethod(db, org, req.id);
      if (!found) throw notFound("payment method");
      if (req.isDefault === undefined || req.isDefault === found.is_default) return { row: found, changed: false };
      if (!req.isDefault) {
        throw invalidArgument([
          { field: "default", message: "cannot be cleared on the default payment method; make another payment method the default instead" },
        ]);
      }
      await makeDefault(db, org, found.id);
      return { row: { ...found, is_default: true }, changed: true };
    });
    if (changed) {
      ctx.log.info("default payment method set", { organization_id: org, payment_method_id: row.id });
      await chargePastDueInvoices(ctx, org);
    }
    return create(UpdatePaymentMethodResponseSchema, { paymentMethod: paymentMethodToProto(row) });
  };
}
