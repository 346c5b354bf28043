import type { Static, TObject, TSchema } from "@sinclair/typebox";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { ApiError, badRequest, unprocessable, type ErrorDetail } from "../errors.ts";
import { body as closedBody, extraOf, type QueryValues } from "../schema.ts";
import type { IdParam } from "./ids.ts";
import type { Route } from "./route.ts";

/** The JSON Schema keywords this module words its messages from (a TypeBox schema is plain JSON Schema). */
interface JsonSchema {
  type?: string;
  format?: string;
  items?: JsonSchema;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  default?: string | number;
}

// RFC 3339, which is what `format: date-time` promises a client.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * A real instant: `Date.parse` rolls 2025-02-30 over to 2 March and takes
 * 24:00, which would restore a database to a time nobody asked for. A leap
 * second (:60) is refused too: `Date` cannot hold it.
 */
function isDateTime(s: string): boolean {
  const m = RFC3339.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = month === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;
  const offsetOk = m[8] === undefined || (Number(m[8]) <= 23 && Number(m[9]) <= 59);
  return month >= 1 && month <= 12 && day >= 1 && day <= days && hour <= 23 && minute <= 59 && second <= 59 && offsetOk;
}

const ajv = new Ajv2020({ allErrors: true, strict: true });
ajv.addFormat("date-time", { type: "string", validate: isDateTime });

const compiled = new WeakMap<TSchema, ValidateFunction>();

/** One validator per schema object, compiled on first use. */
function validatorOf(schema: TSchema): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  return validate;
}

// JSON can carry half a surrogate pair ("\ud800"); no layer behind us can store it as text.
const LONE_SURROGATE = /\p{Cs}/u;
const UNSAFE_TO_ECHO = /[\p{Cc}\p{Cs}]/u;

/** A pseudo-keyword for what ajv does not check: unpaired surrogates in a string. */
const UNICODE = "unicode";

const hasLoneSurrogate = (value: unknown): boolean =>
  typeof value === "string"
    ? LONE_SURROGATE.test(value)
    : Array.isArray(value) && value.some((v) => typeof v === "string" && LONE_SURROGATE.test(v));

/** How a type is named in "must be …". */
function kindOf(schema: JsonSchema): string {
  if (schema.format === "date-time") return "an ISO 8601 timestamp";
  switch (schema.type) {
    case "array":
      return `an array of ${kindOf(schema.items ?? {}).replace(/^an? /, "")}s`;
    case "integer":
      return "an integer";
    case "object":
      return "a JSON object";
    case undefined:
      return "a value";
    default:
      return `a ${schema.type}`;
  }
}

function bounds(schema: JsonSchema): string {
  const { minimum: min, maximum: max } = schema;
  if (min !== undefined && max !== undefined) return `must be between ${min} and ${max}`;
  return min !== undefined ? `must be at least ${min}` : `must be at most ${max}`;
}

/** One message per field: the most useful of its errors, worded from its schema. */
function messageFor(schema: JsonSchema, errors: ErrorObject[]): string {
  const find = (keyword: string) => errors.find((e) => e.keyword === keyword);
  // An error below the field itself is about an item of an array.
  const target = (e: ErrorObject) => (e.instancePath.split("/").length > 2 ? (schema.items as JsonSchema) : schema);
  if (find("required")) return "is required";
  if (find("type")) return `must be ${kindOf(schema)}`;
  if (find(UNICODE)) return "must be valid Unicode (no unpaired surrogates)";
  const en = find("enum");
  if (en) {
    const s = target(en);
    const hint = extraOf(s as TSchema).enumHint;
    return `must ${s === schema ? "be" : "each be"} one of: ${(s.enum as string[]).join(", ")}${hint ? `; ${hint}` : ""}`;
  }
  if (find("format")) return `must be ${kindOf(schema)}`;
  const minLength = find("minLength");
  // An empty name is "required", as the services word it.
  if (minLength) return minLength.params.limit === 1 ? "is required" : `must be at least ${minLength.params.limit} characters`;
  const maxLength = find("maxLength");
  if (maxLength) return `must be at most ${maxLength.params.limit} characters`;
  const maxItems = find("maxItems");
  if (maxItems) return `must have at most ${maxItems.params.limit} items`;
  const pattern = find("pattern");
  if (pattern) return extraOf(target(pattern) as TSchema).pattern ?? `must match ${pattern.params.pattern}`;
  if (find("minimum") || find("maximum")) return bounds(schema);
  return errors[0]!.message ?? "is invalid";
}

/** A field name as a detail may echo it: control characters escaped, absurd lengths cut. */
function echo(name: string): string {
  const safe = UNSAFE_TO_ECHO.test(name) ? JSON.stringify(name).slice(1, -1) : name;
  return safe.length > 64 ? `${safe.slice(0, 64)}…` : safe;
}

/** At most this many unknown fields are named; one more detail counts the rest. */
const UNKNOWN_NAMED = 20;

/** The details of a failed check of `value` (an object) against `schema`: declared fields in order, then unknown ones. */
function detailsOf(schema: TObject, value: Record<string, unknown>, errors: ErrorObject[]): ErrorDetail[] {
  const properties = schema.properties as Record<string, JsonSchema>;
  const byField = new Map<string, ErrorObject[]>();
  const unknown: string[] = [];
  const add = (field: string, e: ErrorObject) => byField.set(field, [...(byField.get(field) ?? []), e]);
  for (const e of errors) {
    if (e.keyword === "additionalProperties") unknown.push(String(e.params.additionalProperty));
    else if (e.keyword === "required") add(String(e.params.missingProperty), e);
    else add(e.instancePath.split("/")[1] ?? "", e);
  }
  for (const name of Object.keys(properties)) {
    if (Object.hasOwn(value, name) && hasLoneSurrogate(value[name])) {
      add(name, { keyword: UNICODE, instancePath: `/${name}`, schemaPath: "", params: {} });
    }
  }
  const details: ErrorDetail[] = [];
  for (const [name, fieldSchema] of Object.entries(properties)) {
    const fieldErrors = byField.get(name);
    if (fieldErrors) details.push({ field: name, message: messageFor(fieldSchema, fieldErrors) });
  }
  const known = Object.keys(properties).join(", ");
  const takes = known === "" ? "it takes none" : `it takes: ${known}`;
  for (const name of unknown.slice(0, UNKNOWN_NAMED)) {
    details.push({ field: echo(name), message: `is not a field of this request (${takes})` });
  }
  if (unknown.length > UNKNOWN_NAMED) {
    details.push({ field: "body", message: `has ${unknown.length - UNKNOWN_NAMED} more unknown fields` });
  }
  return details;
}

/** `body` with the fields that are trimmed (names, e-mail addresses) trimmed, as the services will. */
function trimmed(schema: TObject, body: Record<string, unknown>): Record<string, unknown> {
  let out = body;
  for (const [name, fieldSchema] of Object.entries(schema.properties)) {
    const value = Object.hasOwn(body, name) ? body[name] : undefined;
    if (typeof value === "string" && extraOf(fieldSchema).trim) {
      if (out === body) out = { ...body };
      out[name] = value.trim();
    }
  }
  return out;
}

/**
 * Checks a parsed JSON body against `schema`: 422 naming every field that is
 * missing, of the wrong type, not among the allowed values, too long, holding
 * control characters or unpaired surrogates, or not declared at all (as
 * Stripe does: a typo is not silently ignored).
 */
export function validateBody<S extends TObject>(schema: S, body: unknown): Static<S> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw unprocessable("request body must be a JSON object", [{ field: "body", message: "must be a JSON object" }]);
  }
  const value = trimmed(schema, body as Record<string, unknown>);
  const validate = validatorOf(schema);
  const valid = validate(value);
  const details = detailsOf(schema, value, valid ? [] : (validate.errors ?? []));
  if (details.length > 0) throw unprocessable("request failed validation", details);
  return value as Static<S>;
}

/** Decimal digits beyond which a number is no longer exact (Number.MAX_SAFE_INTEGER has 16). */
const EXACT_DIGITS = 15;

/**
 * A decimal integer of any length as a number: exact up to 15 significant
 * digits; a longer one stands for a value beyond every bound a query schema
 * declares (all far below 10^15), so it is refused as out of range (422,
 * "must be between 1 and 100"), as docs/product.md (Rate limits) has a `per_page` over 100 —
 * not as "not an integer", which it is.
 */
function integerValue(value: string): number {
  if (value.replace(/^-?0*/, "").length <= EXACT_DIGITS) return Number(value);
  return value.startsWith("-") ? -Number.MAX_SAFE_INTEGER : Number.MAX_SAFE_INTEGER;
}

/**
 * Parses the query parameters `schema` declares (see `query` in schema.ts):
 * 400 for a value of the wrong type or a repeated parameter, 422 for one the
 * schema refuses. Defaults are filled in.
 */
export function parseQuery(schema: TObject, raw: Record<string, unknown>): QueryValues {
  const out: QueryValues = {};
  const malformed: ErrorDetail[] = [];
  for (const [name, spec] of Object.entries(schema.properties as Record<string, JsonSchema>)) {
    const value = raw[name];
    if (value === undefined) {
      if (spec.default !== undefined) out[name] = spec.default;
    } else if (typeof value !== "string") {
      malformed.push({ field: name, message: "must be given once" });
    } else if (spec.type !== "integer") {
      out[name] = value;
    } else if (/^-?\d+$/.test(value)) {
      out[name] = integerValue(value);
    } else {
      malformed.push({ field: name, message: "must be an integer" });
    }
  }
  if (malformed.length > 0) throw badRequest("malformed query parameters", malformed);
  const validate = validatorOf(schema);
  if (!validate(out)) throw unprocessable("request failed validation", detailsOf(schema, out, validate.errors ?? []));
  return out;
}

/**
 * An id that cannot exist (wrong prefix or characters, absurd length, control
 * characters) is answered here, 404 as for one that does not exist, without
 * asking a service.
 */
export function checkParams(params: Readonly<Record<string, IdParam>>, values: Record<string, string>): void {
  for (const [name, param] of Object.entries(params)) {
    if (!validatorOf(param.schema)(values[name])) throw new ApiError(404, "resource_not_found", `${param.noun} not found`);
  }
}

/** What a POST, PUT or PATCH that declares no body accepts: nothing (`{}` or no body at all). */
const NO_FIELDS = closedBody({});

/** What a route's handler receives of the request, checked against the route's schemas. */
export function validateRequest(route: Route, req: { params: unknown; query: unknown; body: unknown }) {
  const params = req.params as Record<string, string>;
  if (route.params) checkParams(route.params, params);
  const query = route.query ? parseQuery(route.query, req.query as Record<string, unknown>) : {};
  if (route.body) return { params, query, body: validateBody(route.body, req.body) };
  if (route.method === "POST" || route.method === "PUT" || route.method === "PATCH") validateBody(NO_FIELDS, req.body);
  return { params, query, body: {} };
}
