import { Type, type TString } from "@sinclair/typebox";
import { identifier } from "../schema.ts";
import { EXTENSION_NAME_PATTERN, PLAIN_NAME_PATTERN } from "./responses-inside.ts";

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

/** A thing inside a database named by a plain identifier (a role, a logical database): one that cannot be is 404. */
const nameParam = (noun: string, pattern = PLAIN_NAME_PATTERN): IdParam => ({
  noun,
  schema: Type.String({ pattern, maxLength: 63, description: `The ${noun}'s name.` }),
});

/**
 * The one place that says what each kind of id looks like; routes name theirs
 * (`params: { id: ID.database }`), body fields holding ids use `.schema`. The
 * prefixes are those the services give `newId` (services/kit/src/ids.ts).
 */
export const ID = {
  database: idParam("db", "database"),
  replica: idParam("rep", "replica"),
  trustedSource: idParam("ts", "trusted source"),
  paymentMethod: idParam("pm", "payment method"),
  invoice: idParam("inv", "invoice"),
  alert: idParam("alr", "alert"),
  member: idParam("member", "member"),
  invitation: idParam("invite", "invitation"),
  apiKey: idParam("key", "API key"),
  user: idParam("user", "user"),
  organization: idParam("org", "organization"),
  role: nameParam("role"),
  logicalDb: nameParam("logical database"),
  extension: nameParam("extension", EXTENSION_NAME_PATTERN),
} as const;
