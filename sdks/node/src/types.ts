import type { components, operations } from "./generated/openapi.ts";

/** The API's response and request schemas, by name (`Schemas["Database"]`), generated from /v1/openapi.json. */
export type Schemas = components["schemas"];

/** Every operation of the API, by `operationId`. */
export type OperationId = keyof operations;

type JsonOf<T> = T extends { content: { "application/json": infer J } } ? J : never;

/** The JSON body an operation accepts. */
export type Body<Op extends OperationId> = JsonOf<NonNullable<operations[Op]["requestBody"]>>;

/** The query parameters an operation accepts. */
export type Query<Op extends OperationId> = NonNullable<operations[Op]["parameters"]["query"]>;

/** `data` of an operation's 200 answer (for lists: the items and any list-wide fields). */
export type ListData<Op extends OperationId> = operations[Op]["responses"] extends { 200: infer R }
  ? JsonOf<R> extends { data: infer D }
    ? D
    : never
  : never;

/** `meta` of a list response: the page and the totals. */
export type ListMeta = Schemas["ListMeta"];

/** One `{field, message}` per invalid field of a validation error. */
export type ErrorDetail = Schemas["Error"]["error"]["details"][number];

/** What a database's status can be. */
export type DatabaseStatus = Schemas["Database"]["status"];

/** What a read replica's status can be. */
export type ReplicaStatus = Schemas["Replica"]["status"];
