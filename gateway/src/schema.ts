import { EMAIL_MAX_LENGTH, ID_MAX_LENGTH, NAME_PATTERN, PAGE, PER_PAGE, type Page } from "@dbaas/kit";
import { Type, type Static, type TObject, type TProperties, type TSchema, type TString } from "@sinclair/typebox";

/**
 * The building blocks of request schemas: JSON Schema objects (TypeBox) that
 * ajv checks (`routes/validate.ts`) and the OpenAPI document publishes as
 * they are, so what is validated and what is documented cannot drift apart.
 * Handlers get their body types from the same objects (`Static<>`).
 *
 * The gateway checks shape: types, known fields only, enums from the shared
 * catalogue, the shared length limits and character rules
 * (services/kit/src/limits.ts). Rules that need state (a unique name, a
 * member of this organization) stay with the services.
 */

/** Per-schema behaviour beyond JSON Schema; a symbol, so neither ajv nor the document sees it. */
export const EXTRA = Symbol("extra");

export interface Extra {
  /** What a value failing `pattern` is told. */
  pattern?: string;
  /** Appended to "must be one of: …". */
  enumHint?: string;
  /**
   * Trimmed before it is checked, as the service trims it: the published
   * minLength/maxLength are then exactly the service's rule.
   */
  trim?: boolean;
}

type WithExtra = { [EXTRA]?: Extra };

/** What a schema carries beyond JSON Schema (see EXTRA). */
export const extraOf = (schema: TSchema): Extra => (schema as WithExtra)[EXTRA] ?? {};

const withExtra = <T extends TSchema>(schema: T, extra: Extra): T => Object.assign(schema, { [EXTRA]: extra });

/**
 * Every string but names: no control characters (C0, DEL, C1) and no half of
 * a surrogate pair standing alone (JSON can carry "\ud800"). No field of this
 * API is multi-line or binary, and PostgreSQL cannot store U+0000 at all.
 * ECMA-262 with the `u` flag, as ajv compiles it, like the kit's NAME_PATTERN.
 */
export const NO_CONTROL_CHARACTERS = "^[^\\p{Cc}\\p{Cs}]*$";

const NO_CONTROL_MESSAGE = "must not contain control characters or unpaired surrogates";

/** Lengths of our own, beyond the kit's. */
export const TIMESTAMP_MAX_LENGTH = 64;
/** An ISO 4217 code; billing says which. */
export const CURRENCY_MAX_LENGTH = 3;

/** A string of `minLength` (default 0) to `maxLength` characters without control characters. */
export function text(maxLength: number, description: string, minLength?: number): TString {
  const bounds = minLength === undefined ? { maxLength } : { minLength, maxLength };
  return withExtra(Type.String({ ...bounds, pattern: NO_CONTROL_CHARACTERS, description }), { pattern: NO_CONTROL_MESSAGE });
}

/** A name people read: trimmed, then `min`–`max` characters, none of the kit's forbidden characters. */
export function displayText(min: number, max: number, description: string): TString {
  return withExtra(Type.String({ minLength: min, maxLength: max, pattern: NAME_PATTERN, description }), {
    pattern: "must not contain control or format characters (line breaks, bidi overrides, zero-width characters)",
    trim: true,
  });
}

/** An e-mail address, trimmed as identity trims it; identity judges its form. */
export function emailAddress(description: string): TString {
  return withExtra(Type.String({ maxLength: EMAIL_MAX_LENGTH, pattern: NO_CONTROL_CHARACTERS, description }), {
    pattern: NO_CONTROL_MESSAGE,
    trim: true,
  });
}

/**
 * One of `values` (always a list from the shared catalogue in services/catalogue,
 * never one written here), published as `enum` so a generated client has the
 * values as a type.
 */
export function oneOf<const T extends readonly string[]>(values: T, description: string, enumHint?: string) {
  const schema = Type.Unsafe<T[number]>({
    type: "string",
    enum: [...values],
    maxLength: Math.max(...values.map((v) => v.length)),
    description,
  });
  return enumHint ? withExtra(schema, { enumHint }) : schema;
}

/** An RFC 3339 timestamp (`2026-01-01T00:00:00Z`). */
export function timestamp(description: string): TString {
  return Type.String({ format: "date-time", maxLength: TIMESTAMP_MAX_LENGTH, description });
}

/**
 * The identifier of one kind of resource as the services mint them
 * (services/kit `newId`: `<prefix>-` and lowercase letters or digits), at
 * most the kit's ID_MAX_LENGTH.
 */
export function identifier(prefix: string, noun: string): TString {
  return withExtra(
    Type.String({ pattern: `^${prefix}-[a-z0-9]+$`, maxLength: ID_MAX_LENGTH, description: `The ${noun}'s id (\`${prefix}-…\`).` }),
    { pattern: `must be an id of the form ${prefix}-…` },
  );
}

/** `schema` with its own description (for a field that reuses a shared schema, e.g. an id). */
export const describe = <T extends TSchema>(schema: T, description: string): T => ({ ...schema, description });

/** A request body: exactly these fields, anything else is refused (422 naming it). */
export function body<P extends TProperties>(properties: P): TObject<P> {
  return Type.Object(properties, { additionalProperties: false });
}

export const optional = Type.Optional;

export type Infer<S extends TSchema> = Static<S>;

/** The query parameters of every list, with the kit's paging rules (services/kit paging.ts), which the services apply too. */
export const PAGINATION = {
  page: Type.Optional(Type.Integer({ ...PAGE, description: "Page number." })),
  per_page: Type.Optional(Type.Integer({ ...PER_PAGE, description: "Items per page." })),
};

/**
 * Query parameters: a value of the wrong type (or given twice) is a
 * malformed request, 400; one out of range or not among the allowed values is
 * a well-formed request that failed validation, 422. Parameters a route does
 * not declare are ignored.
 */
export const query = <P extends TProperties>(properties: P): TObject<P> => Type.Object(properties);

export const PAGINATION_QUERY = query(PAGINATION);

export type QueryValues = Record<string, string | number | undefined>;

export type { Page };

/** The page a validated query asks for (its bounds are in PAGINATION). */
export function pagination(values: QueryValues): Page {
  return {
    page: (values.page as number | undefined) ?? PAGE.default,
    perPage: (values.per_page as number | undefined) ?? PER_PAGE.default,
  };
}
