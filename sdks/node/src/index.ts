export { DbaasClient } from "./client.ts";
export { DbaasConnectionError, DbaasError, DbaasWaitError } from "./errors.ts";
export type { components, operations, paths } from "./generated/openapi.ts";
export { OPERATIONS, PAGED, type PagedOperationId } from "./operations.ts";
export { type Page, PageIterator } from "./pages.ts";
export type { WaitOptions } from "./resources/databases.ts";
export { type ClientOptions, DEFAULT_BASE_URL, type RateLimit, type RequestOptions, type ResponseInfo } from "./transport.ts";
export type { Body, DatabaseStatus, ErrorDetail, ListMeta, OperationId, Query, ReplicaStatus, Schemas } from "./types.ts";
