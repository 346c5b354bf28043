import type { TString } from "@sinclair/typebox";
import { identifier } from "../schema.ts";

/**
 * A path parameter naming a resource: its schema (published on the
 * parameter, and checked before any service is asked) and what the 404 for an
 * id that cannot exist calls it.
 */
export interface IdParam {
  noun: string;
  schema: TString;
}

const idParam = (prefix: string, noun: string): IdParam => ({ noun, schema: identifier(prefix, noun) });

/**
 * The one place that says what each kind of id looks like; routes name theirs
 * (`params: { id: ID.database }`), body fields holding ids use `.schema`. The
 * prefixes are those the services give `newId` (services/kit/src/ids.ts).
 */
export const ID = {
  database: idParam("db", "database"),
  replica: idParam("rep", "replica"),
  paymentMethod: idParam("pm", "payment method"),
  invoice: idParam("inv", "invoice"),
  alert: idParam("alr", "alert"),
  member: idParam("member", "member"),
  invitation: idParam("invite", "invitation"),
  apiKey: idParam("key", "API key"),
  user: idParam("user", "user"),
  organization: idParam("org", "organization"),
} as const;
