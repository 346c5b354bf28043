/**
 * A response record declared once: each field's JSON Schema and how it is read
 * from the message the upstream answered, from which follow both the closed
 * object schema the OpenAPI document carries (responses.ts) and the function
 * the route's handler maps the message with. Adding a field to an answer is
 * one line here in the gateway (docs/architecture.md, Adding a field to the
 * public API): the schema and the mapping cannot disagree.
 *
 * A field is `field(schema, read)`, present in every record, or
 * `optional(schema, read)`, absent when `read` gives `undefined` or `""`
 * (proto3's unset string), as `status_reason` is absent while there is none.
 */

/** A JSON Schema (2020-12, as OpenAPI 3.1 uses). */
export type JsonSchema = Record<string, unknown>;

// ---- The schema builders every response schema is written with ----

export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
export const str = (description?: string): JsonSchema => ({ type: "string", ...(description && { description }) });
export const bool = (description?: string): JsonSchema => ({ type: "boolean", ...(description && { description }) });
export const dateTime = (description?: string): JsonSchema => ({
  type: "string",
  format: "date-time",
  ...(description && { description }),
});
export const nullableDateTime = (description: string): JsonSchema => ({ type: ["string", "null"], format: "date-time", description });
export const oneOf = (values: readonly string[], description?: string): JsonSchema => ({
  type: "string",
  enum: [...values],
  ...(description && { description }),
});
export const int = (description?: string): JsonSchema => ({ type: "integer", ...(description && { description }) });
export const num = (description?: string): JsonSchema => ({ type: "number", ...(description && { description }) });
/** An identifier's schema: a string with its prefix. */
export const id = (prefix: string): JsonSchema => ({
  type: "string",
  pattern: `^${prefix}`,
  description: `Identifier, prefix \`${prefix}\`.`,
});
export const arrayOf = (items: JsonSchema): JsonSchema => ({ type: "array", items });

/**
 * An inline schema given the name the Go and Python clients' generated types use for it
 * (sdks/scripts/generate-types.ts); a component schema is named by its key.
 */
export const titled = (title: string, schema: JsonSchema): JsonSchema => ({ title, ...schema });

/** A closed object: every property required except those named in `optional`. */
export function object(description: string, properties: Record<string, JsonSchema>, optional: readonly string[] = []): JsonSchema {
  return {
    type: "object",
    description,
    properties,
    required: Object.keys(properties).filter((k) => !optional.includes(k)),
    additionalProperties: false,
  };
}

// ---- Fields and records ----

/** One field of a record: its schema, how it is read from `M`, and whether it may be absent. */
export interface Field<M, V, O extends boolean = boolean> {
  readonly schema: JsonSchema;
  readonly read: (message: M) => V | undefined;
  readonly optional: O;
}

/** A field every answer carries. */
export const field = <M, V>(schema: JsonSchema, read: (message: M) => V): Field<M, V, false> => ({ schema, read, optional: false });

/** A field absent from the answer when `read` gives `undefined` or `""`; named optional in the schema. */
export const optional = <M, V>(schema: JsonSchema, read: (message: M) => V | undefined): Field<M, Exclude<V, "">, true> => ({
  schema,
  read: read as (message: M) => Exclude<V, ""> | undefined,
  optional: true,
});

/** A field whose value is always the same, `{const: value}` in the schema. */
export const constant = <const V extends string>(value: V): Field<unknown, V, false> => ({
  schema: { const: value },
  read: () => value,
  optional: false,
});

// biome-ignore lint/suspicious/noExplicitAny: a field's value type is whatever its read gives.
type AnyField<M> = Field<M, any, boolean>;

export type Fields<M> = Record<string, AnyField<M>>;

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** What `map` gives: each field's value, the optional ones possibly absent. */
export type Mapped<F> = Simplify<
  { [K in keyof F as F[K] extends Field<never, unknown, false> ? K : never]: F[K] extends Field<never, infer V, false> ? V : never } & {
    [K in keyof F as F[K] extends Field<never, unknown, false> ? never : K]?: F[K] extends Field<never, infer V, boolean> ? V : never;
  }
>;

/** Fields mapped together, with their schemas: a record's, or the ones a list carries beside its items. */
export interface FieldSet<M, F extends Fields<M>> {
  readonly fields: F;
  /** Each field's schema, in declaration order. */
  readonly properties: Record<string, JsonSchema>;
  /** The names of the fields that may be absent. */
  readonly optional: readonly string[];
  /** The message as the answer carries it (a plain function: pass it to `Array.prototype.map`). */
  readonly map: (message: M) => Mapped<F>;
}

/** A record: its fields, and the closed object schema they make. */
export interface RecordOf<M, F extends Fields<M>> extends FieldSet<M, F> {
  readonly schema: JsonSchema;
}

/**
 * Fields read from `M`, in declaration order: the answer's keys come in that
 * order, optional ones left out when absent.
 */
export function fieldsOf<M>() {
  return <F extends Fields<M>>(fields: F): FieldSet<M, F> => {
    const entries = Object.entries(fields);
    return {
      fields,
      properties: Object.fromEntries(entries.map(([name, f]) => [name, f.schema])),
      optional: entries.filter(([, f]) => f.optional).map(([name]) => name),
      map: (message: M) => {
        const out: Record<string, unknown> = {};
        for (const [name, f] of entries) {
          const value = f.read(message);
          if (f.optional && (value === undefined || value === "")) continue;
          out[name] = value;
        }
        return out as Mapped<F>;
      },
    };
  };
}

/**
 * A record read from `M`: `record<Database>("A database …")({ id: field(…), … })`.
 * `extra` adds keywords to its schema after the object's own (`examples`).
 */
export function record<M>(description: string, extra: JsonSchema = {}) {
  return <F extends Fields<M>>(fields: F): RecordOf<M, F> => {
    const set = fieldsOf<M>()(fields);
    return { ...set, schema: { ...object(description, set.properties, set.optional), ...extra } };
  };
}

/** The same fields read from a message inside `M` (a response's record, say). */
export type Through<M, N, F extends Fields<N>> = {
  [K in keyof F]: F[K] extends Field<N, infer V, infer O extends boolean> ? Field<M, V, O> : never;
};

/** `fields` (read from an `N`) read from the `N` that `get` finds in an `M`: a record reused inside another message. */
export function through<M, N, F extends Fields<N>>(get: (message: M) => N, fields: F): Through<M, N, F> {
  return Object.fromEntries(
    Object.entries(fields).map(([name, f]) => [name, { ...f, read: (message: M) => f.read(get(message)) }]),
  ) as Through<M, N, F>;
}
