import { DbaasConnectionError, DbaasError } from "@dbaas/client";

/** What a failed call shows: a message for the form, and the API's `details` by the field they name. */
export interface Problem {
  message: string;
  fields: Record<string, string>;
  /** 402: the organization needs a payment method (the page links to adding a card). */
  paymentRequired: boolean;
  /** 401: the token expired or was revoked. */
  unauthenticated: boolean;
}

export function problemOf(err: unknown): Problem {
  if (err instanceof DbaasError) {
    const fields: Record<string, string> = {};
    for (const d of err.details) {
      // `body.name` and `name` both name the field `name`.
      const field = d.field.replace(/^(body|query)\./, "");
      fields[field] = fields[field] ? `${fields[field]}; ${d.message}` : d.message;
    }
    return { message: err.message, fields, paymentRequired: err.status === 402, unauthenticated: err.status === 401 };
  }
  if (err instanceof DbaasConnectionError) {
    return { message: "The API cannot be reached; try again in a moment.", fields: {}, paymentRequired: false, unauthenticated: false };
  }
  return { message: err instanceof Error ? err.message : String(err), fields: {}, paymentRequired: false, unauthenticated: false };
}
