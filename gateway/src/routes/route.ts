import { SCOPES, type Scope } from "@dbaas/catalogue";
import type { Principal } from "@dbaas/proto/identity";
import type { GatewayContext } from "../context.ts";
import type { Reply } from "../middleware/envelope.ts";
import type { Static, TObject } from "@sinclair/typebox";
import type { QueryValues } from "../schema.ts";
import type { IdParam } from "./ids.ts";
import type { ListExtraName, SchemaName } from "./responses.ts";

/** Scope names (docs/product.md, Roles and permissions); identity computes which of them a principal has. */
export const PERMISSIONS = SCOPES;

export type Permission = Scope;

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface Call<B> {
  ctx: GatewayContext;
  params: Record<string, string>;
  query: QueryValues;
  body: B;
}

export interface AuthedCall<B> extends Call<B> {
  principal: Principal;
}

interface RouteBase {
  method: Method;
  /** Express syntax (`/v1/databases/:id`). */
  path: string;
  /** One line for the OpenAPI document. */
  summary: string;
  /** The success response, for the OpenAPI document (the handler's reply decides; the e2e tests compare). */
  response: SuccessResponse;
  /**
   * Error statuses the route's upstream can answer beyond those the gateway
   * derives from its shape (see `errorStatuses` in openapi.ts), e.g. 402.
   */
  errors?: ErrorStatus[];
  /** Each `:name` of the path and the id it holds (routes/ids.ts); an id that cannot exist is 404 here. */
  params?: Readonly<Record<string, IdParam>>;
  /** Query parameters (`query` in schema.ts). */
  query?: TObject;
  /** The JSON body (`body` in schema.ts); the handler's body type is its Static<>. */
  body?: TObject;
}

export type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 409 | 413 | 422 | 429 | 500 | 503 | 504;

/** What a route answers on success. */
export type SuccessResponse =
  /** `{data, meta}`, `data` as the named schema (202: accepted, still under way). */
  | { status: 200 | 201 | 202; data: SchemaName }
  /** `{data: {<name>: [...]}, meta}` with page meta; `extra` names the fields some lists carry beside their items. */
  | { status: 200; list: string; item: SchemaName; extra?: ListExtraName }
  | { status: 204 }
  /** A file in its own content type, not the envelope. */
  | { status: 200; file: string }
  /** JSON that is a document in its own right (the OpenAPI description). */
  | { status: 200; document: SchemaName };

export const json = (status: 200 | 201 | 202, data: SchemaName): SuccessResponse => ({ status, data });
export const listOf = (list: string, item: SchemaName, extra?: ListExtraName): SuccessResponse => ({
  status: 200,
  list,
  item,
  ...(extra && { extra }),
});
export const NO_CONTENT: SuccessResponse = { status: 204 };
export const fileOf = (contentType: string): SuccessResponse => ({ status: 200, file: contentType });

export interface PublicRoute extends RouteBase {
  public: true;
  handler: (call: Call<unknown>) => Promise<Reply>;
}

export interface ProtectedRoute extends RouteBase {
  permission: Permission;
  handler: (call: AuthedCall<unknown>) => Promise<Reply>;
}

/** Every route is one or the other: there is no way to declare a route without saying who may call it. */
export type Route = PublicRoute | ProtectedRoute;

type WithBody<S extends TObject | undefined> = S extends TObject ? Static<S> : Record<never, never>;

/**
 * Every `:name` of the path must have its id declared in `params`, and only
 * those: a route cannot reach a service with an id nobody checked.
 */
function checkDeclaredParams(def: RouteBase): void {
  const inPath = [...def.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!).sort();
  const declared = Object.keys(def.params ?? {}).sort();
  if (inPath.join() !== declared.join()) {
    throw new Error(
      `${def.method} ${def.path}: params must declare exactly the path's parameters (${inPath.join(", ") || "none"}), ` +
        "each an id from routes/ids.ts",
    );
  }
}

/** Declares a route open to anyone; the handler's body type follows its schema. */
export function publicRoute<S extends TObject | undefined = undefined>(
  def: Omit<RouteBase, "body"> & { body?: S; handler: (call: Call<WithBody<NoInfer<S>>>) => Promise<Reply> },
): PublicRoute {
  checkDeclaredParams(def);
  return { ...def, public: true } as PublicRoute;
}

/** Declares a route that needs a credential carrying `permission`. */
export function protectedRoute<S extends TObject | undefined = undefined>(
  def: Omit<RouteBase, "body"> & {
    permission: Permission;
    body?: S;
    handler: (call: AuthedCall<WithBody<NoInfer<S>>>) => Promise<Reply>;
  },
): ProtectedRoute {
  checkDeclaredParams(def);
  return def as ProtectedRoute;
}
