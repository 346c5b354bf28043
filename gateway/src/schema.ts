import { badRequest, unprocessable, type ErrorDetail } from "./errors.ts";

/**
 * Request shapes, checked for types only: whether a name is long enough or a
 * region exists is the services' business. The same schemas feed the OpenAPI
 * document, so what is validated and what is documented cannot drift apart.
 */
export type FieldType = "string" | "number" | "integer" | "boolean" | "string[]" | "date-time";

export interface FieldSpec {
  type: FieldType;
  required: boolean;
  description: string;
}

export type BodySchema = Record<string, FieldSpec>;

type TypeOf<T extends FieldType> = T extends "string" | "date-time"
  ? string
  : T extends "number" | "integer"
    ? number
    : T extends "boolean"
      ? boolean
      : string[];

/** The body type a schema admits: required fields present, optional ones possibly absent. */
export type Infer<S extends BodySchema> = {
  [K in keyof S as S[K]["required"] extends true ? K : never]: TypeOf<S[K]["type"]>;
} & {
  [K in keyof S as S[K]["required"] extends true ? never : K]?: TypeOf<S[K]["type"]>;
};

export const required = <T extends FieldType>(type: T, description: string) =>
  ({ type, required: true, description }) as const;
export const optional = <T extends FieldType>(type: T, description: string) =>
  ({ type, required: false, description }) as const;

function typeError(type: FieldType, value: unknown): string | undefined {
  switch (type) {
    case "string":
      return typeof value === "string" ? undefined : "must be a string";
    case "date-time":
      return typeof value === "string" && !Number.isNaN(Date.parse(value)) && /^\d{4}-\d{2}-\d{2}T/.test(value)
        ? undefined
        : "must be an ISO 8601 timestamp";
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? undefined : "must be a number";
    case "integer":
      return Number.isInteger(value) ? undefined : "must be an integer";
    case "boolean":
      return typeof value === "boolean" ? undefined : "must be a boolean";
    case "string[]":
      return Array.isArray(value) && value.every((v) => typeof v === "string")
        ? undefined
        : "must be an array of strings";
  }
}

/**
 * Checks a parsed JSON body against `schema`: 422 with one detail per missing
 * or wrongly typed field. Fields the schema does not name are dropped, so a
 * handler only ever sees what it declared.
 */
export function validateBody<S extends BodySchema>(schema: S, body: unknown): Infer<S> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw unprocessable("request body must be a JSON object", [{ field: "body", message: "must be a JSON object" }]);
  }
  const input = body as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const details: ErrorDetail[] = [];
  for (const [field, spec] of Object.entries(schema)) {
    const value = Object.hasOwn(input, field) ? input[field] : undefined;
    if (value === undefined) {
      if (spec.required) details.push({ field, message: "is required" });
      continue;
    }
    const problem = typeError(spec.type, value);
    if (problem) details.push({ field, message: problem });
    else out[field] = value;
  }
  if (details.length > 0) throw unprocessable("request failed validation", details);
  return out as Infer<S>;
}

export type QueryType = "string" | "integer";

export interface QuerySpec {
  type: QueryType;
  description: string;
  /** For the document: the bounds `pagination` enforces (422 outside them). */
  minimum?: number;
  maximum?: number;
  default?: number;
  /** For the document: the values the service accepts (422 for others). */
  enum?: readonly string[];
}

export type QuerySchema = Record<string, QuerySpec>;

export type QueryValues = Record<string, string | number | undefined>;

/**
 * Parses the query parameters `schema` names. A value of the wrong type (or a
 * repeated parameter) is a malformed request, 400, not a validation failure of
 * a well-formed one (DESIGN.md: "unknown query value type").
 */
export function parseQuery(schema: QuerySchema, query: Record<string, unknown>): QueryValues {
  const out: QueryValues = {};
  const details: ErrorDetail[] = [];
  for (const [name, spec] of Object.entries(schema)) {
    const raw = query[name];
    if (raw === undefined) continue;
    if (typeof raw !== "string") {
      details.push({ field: name, message: "must be given once" });
      continue;
    }
    if (spec.type === "integer") {
      if (!/^-?\d{1,9}$/.test(raw)) details.push({ field: name, message: "must be an integer" });
      else out[name] = Number(raw);
    } else {
      out[name] = raw;
    }
  }
  if (details.length > 0) throw badRequest("malformed query parameters", details);
  return out;
}

const PAGE = { minimum: 1, default: 1 };
const PER_PAGE = { minimum: 1, maximum: 100, default: 20 };

export const PAGINATION_QUERY: QuerySchema = {
  page: { type: "integer", description: "Page number.", ...PAGE },
  per_page: { type: "integer", description: "Items per page.", ...PER_PAGE },
};

export interface Page {
  page: number;
  perPage: number;
}

/**
 * Pagination bounds are checked here, once for every list endpoint, so that
 * services receive explicit values and never have to tell "absent" from 0.
 */
export function pagination(query: QueryValues): Page {
  const page = (query.page as number | undefined) ?? PAGE.default;
  const perPage = (query.per_page as number | undefined) ?? PER_PAGE.default;
  const details: ErrorDetail[] = [];
  if (page < PAGE.minimum) details.push({ field: "page", message: `must be at least ${PAGE.minimum}` });
  if (perPage < PER_PAGE.minimum || perPage > PER_PAGE.maximum) {
    details.push({ field: "per_page", message: `must be between ${PER_PAGE.minimum} and ${PER_PAGE.maximum}` });
  }
  if (details.length > 0) throw unprocessable("request failed validation", details);
  return { page, perPage };
}
