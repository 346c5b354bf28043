import { PAGE, PER_PAGE } from "@dbaas/kit";
import { PUBLIC_CODES, publicCodesOf } from "../errors.ts";
import { IDEMPOTENCY_KEY_FORMAT } from "../idempotency/idempotency.ts";
import { SANE_REQUEST_ID } from "../middleware/request-id.ts";
import type { TObject, TSchema } from "@sinclair/typebox";
import type { IdParam } from "./ids.ts";
import { LIST_EXTRA_FIELDS, RESPONSE_SCHEMAS, type JsonSchema } from "./responses.ts";
import type { ErrorStatus, Route, SuccessResponse } from "./route.ts";

/**
 * A request schema as the document carries it: the very object the gateway
 * validates with, as JSON (TypeBox's symbol keys dropped). Bodies are closed
 * (`additionalProperties: false`): a field they do not name is refused.
 */
const published = (schema: TSchema): JsonSchema => JSON.parse(JSON.stringify(schema)) as JsonSchema;

/** A parameter's schema without its description, which the parameter carries. */
function parameter(name: string, location: "path" | "query", required: boolean, schema: TSchema): JsonSchema {
  const { description, ...rest } = published(schema);
  return { name, in: location, required, description, schema: rest };
}

const queryParameters = (query: TObject): JsonSchema[] =>
  Object.entries(query.properties).map(([name, spec]) => parameter(name, "query", false, spec));

const pathParameters = (params: Readonly<Record<string, IdParam>>): JsonSchema[] =>
  Object.entries(params).map(([name, param]) => parameter(name, "path", true, param.schema));

const REQUEST_ID_PATTERN = SANE_REQUEST_ID.source;

const header = (description: string, schema: JsonSchema, required: boolean) => ({ description, required, schema });

const HEADERS = {
  RequestId: header(
    "The request's id, also in `meta.request_id`: a sane client `X-Request-Id`, or a new one (`req_…`).",
    { type: "string", pattern: REQUEST_ID_PATTERN },
    true,
  ),
  RateLimitLimit: header("Requests allowed in the window closest to exhaustion.", { type: "integer", minimum: 0 }, true),
  RateLimitRemaining: header("Requests left in that window.", { type: "integer", minimum: 0 }, true),
  RateLimitReset: header("When that window resets, Unix time in seconds.", { type: "integer", minimum: 0 }, true),
  RetryAfter: header("Seconds to wait before retrying.", { type: "integer", minimum: 1 }, true),
  RetryAfterOptional: header(
    "Seconds to wait before retrying; set when a request with the same Idempotency-Key is still running.",
    { type: "integer", minimum: 1 },
    false,
  ),
  WwwAuthenticate: header("`Bearer` challenge (RFC 6750).", { type: "string" }, true),
  IdempotentReplayed: header(
    "`true` when this is the stored response of an earlier request with the same Idempotency-Key.",
    { const: "true" },
    false,
  ),
  ContentDisposition: header("Suggested file name.", { type: "string" }, true),
};

const headerRef = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });

/** On every response of the API, errors included (docs/product.md, Envelope and errors). */
const COMMON_HEADERS = {
  "X-Request-Id": headerRef("RequestId"),
  "X-RateLimit-Limit": headerRef("RateLimitLimit"),
  "X-RateLimit-Remaining": headerRef("RateLimitRemaining"),
  "X-RateLimit-Reset": headerRef("RateLimitReset"),
};

interface ErrorResponse {
  name: string;
  description: string;
  headers?: Record<string, JsonSchema>;
}

const ERRORS: Record<ErrorStatus, ErrorResponse> = {
  400: {
    name: "BadRequest",
    description:
      "Malformed request: unparseable JSON, wrong content type, a query value of the wrong type, a malformed Idempotency-Key or path.",
  },
  401: {
    name: "Unauthorized",
    description: "Missing, malformed, unknown, expired or revoked credential (or, on log-in routes, a wrong password).",
    headers: { "WWW-Authenticate": headerRef("WwwAuthenticate") },
  },
  402: { name: "PaymentRequired", description: "The organization must add a payment method first." },
  403: { name: "Forbidden", description: "The credential lacks the permission the action requires." },
  404: { name: "NotFound", description: "No such resource in the caller's organization." },
  409: {
    name: "Conflict",
    description: "Conflict with the resource's current state, or a request with the same Idempotency-Key still running.",
    headers: { "Retry-After": headerRef("RetryAfterOptional") },
  },
  413: { name: "PayloadTooLarge", description: "Request body over 1 MB." },
  422: {
    name: "UnprocessableEntity",
    description:
      "Well-formed request that failed validation; `details` names each field. Also an Idempotency-Key reused for a different request.",
  },
  429: {
    name: "TooManyRequests",
    description: "Rate limit exceeded; the X-RateLimit-* headers describe the exhausted window.",
    headers: { "Retry-After": headerRef("RetryAfter") },
  },
  500: { name: "InternalError", description: "Internal error; the message is generic." },
  503: {
    name: "ServiceUnavailable",
    description: "Maintenance (`maintenance_mode`) or an internal service unavailable (`service_unavailable`).",
    headers: { "Retry-After": headerRef("RetryAfter") },
  },
  504: { name: "GatewayTimeout", description: "An internal service did not answer in time." },
};

function errorResponse(status: ErrorStatus): JsonSchema {
  const e = ERRORS[status];
  return {
    description: e.description,
    headers: { ...COMMON_HEADERS, ...e.headers },
    content: {
      "application/json": {
        schema: {
          allOf: [{ $ref: "#/components/schemas/Error" }],
          type: "object",
          properties: { error: { type: "object", properties: { code: { type: "string", enum: publicCodesOf(status) } } } },
        },
      },
    },
  };
}

const SCHEMAS: Record<string, JsonSchema> = {
  Meta: {
    type: "object",
    properties: { request_id: { type: "string", description: "Same as the X-Request-Id header." } },
    required: ["request_id"],
    additionalProperties: false,
  },
  ListMeta: {
    type: "object",
    properties: {
      request_id: { type: "string" },
      page: { type: "integer", minimum: PAGE.minimum },
      per_page: { type: "integer", minimum: PER_PAGE.minimum, maximum: PER_PAGE.maximum },
      total: { type: "integer", minimum: 0, description: "Items across all pages." },
      total_pages: { type: "integer", minimum: 0, description: "`ceil(total / per_page)`; 0 for an empty list." },
    },
    required: ["request_id", "page", "per_page", "total", "total_pages"],
    additionalProperties: false,
  },
  Error: {
    type: "object",
    properties: {
      error: {
        type: "object",
        properties: {
          code: { type: "string", enum: PUBLIC_CODES },
          message: { type: "string", description: "For people; never internal hosts or stack traces." },
          details: {
            type: "array",
            description: "One entry per invalid field (validation_error); empty otherwise.",
            items: {
              type: "object",
              properties: { field: { type: "string" }, message: { type: "string" } },
              required: ["field", "message"],
              additionalProperties: false,
            },
          },
        },
        required: ["code", "message", "details"],
        additionalProperties: false,
      },
      meta: { $ref: "#/components/schemas/Meta" },
    },
    required: ["error", "meta"],
    additionalProperties: false,
  },
  ...RESPONSE_SCHEMAS,
};

const PARAMETERS = {
  RequestId: {
    name: "X-Request-Id",
    in: "header",
    required: false,
    description: "Your own id for the request, echoed in X-Request-Id and `meta.request_id` (otherwise a new one is made).",
    schema: { type: "string", pattern: REQUEST_ID_PATTERN },
  },
  IdempotencyKey: {
    name: "Idempotency-Key",
    in: "header",
    required: false,
    description:
      "Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true); " +
      "the same key with a different request is 422, while the first is still running 409.",
    schema: { type: "string", pattern: IDEMPOTENCY_KEY_FORMAT.source },
  },
};

function envelope(data: JsonSchema, meta: "Meta" | "ListMeta"): JsonSchema {
  return {
    type: "object",
    properties: { data, meta: { $ref: `#/components/schemas/${meta}` } },
    required: ["data", "meta"],
    additionalProperties: false,
  };
}

function successResponse(route: Route): JsonSchema {
  const res: SuccessResponse = route.response;
  const headers = {
    ...COMMON_HEADERS,
    ...(route.method === "POST" && { "Idempotent-Replayed": headerRef("IdempotentReplayed") }),
  };
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  if ("data" in res) {
    return { description: route.summary, headers, content: { "application/json": { schema: envelope(ref(res.data), "Meta") } } };
  }
  if ("list" in res) {
    const extra = res.extra ? LIST_EXTRA_FIELDS[res.extra] : {};
    const data = {
      type: "object",
      properties: { [res.list]: { type: "array", items: ref(res.item) }, ...extra },
      required: [res.list, ...Object.keys(extra)],
      additionalProperties: false,
    };
    return { description: route.summary, headers, content: { "application/json": { schema: envelope(data, "ListMeta") } } };
  }
  if ("file" in res) {
    return {
      description: route.summary,
      headers: { ...headers, "Content-Disposition": headerRef("ContentDisposition") },
      content: { [res.file]: { schema: { type: "string", contentMediaType: res.file } } },
    };
  }
  if ("document" in res) {
    return { description: route.summary, headers, content: { "application/json": { schema: ref(res.document) } } };
  }
  return { description: "Done; no body.", headers };
}

const pathParams = (route: Route) => [...route.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]);

/**
 * Which errors a route can answer, from its shape: every route can be rate
 * limited, fail, be in maintenance; anything reaching a service can time out;
 * a body, query or path can be malformed; POST carries Idempotency-Key
 * (409 while running, 422 for another request). Upstream-specific ones are
 * listed on the route (`errors`).
 */
export function errorStatuses(route: Route): ErrorStatus[] {
  const s = new Set<ErrorStatus>([429, 500, 503, ...(route.errors ?? [])]);
  // The only route answered by the gateway alone.
  if (!("document" in route.response)) s.add(504);
  const hasPath = pathParams(route).length > 0;
  if (route.body || route.query || hasPath || route.method === "POST") s.add(400);
  if ("permission" in route) {
    s.add(401);
    s.add(403);
  }
  if (hasPath) s.add(404);
  if (route.method === "POST") {
    s.add(409);
    s.add(422);
  }
  if (route.method === "POST" || route.method === "PUT" || route.method === "PATCH") s.add(413);
  if (route.body || route.query) s.add(422);
  return [...s].sort((a, b) => a - b);
}

const TAGS = [
  {
    name: "Authentication",
    description: "Sign-up, log-in and joining by invitation: no credential needed.",
    paths: ["/v1/auth/", "/v1/invitations/"],
  },
  { name: "API keys", description: "Organization credentials that outlive their creator.", paths: ["/v1/organization/api-keys"] },
  { name: "Organization", description: "The organization, its members and invitations.", paths: ["/v1/organization"] },
  { name: "Databases", description: "Databases and their lifecycle.", paths: ["/v1/databases"] },
  { name: "Catalogue", description: "What a database can be created with.", paths: ["/v1/regions", "/v1/tiers", "/v1/versions"] },
  {
    name: "Billing",
    description: "Usage, its price, spending alerts on it, the monthly invoices and the payment methods they are charged to.",
    paths: ["/v1/billing/"],
  },
  { name: "Meta", description: "This description.", paths: ["/v1/openapi.json"] },
];

function tagOf(path: string): string {
  const tag = TAGS.find((t) => t.paths.some((p) => path.startsWith(p)));
  if (!tag) throw new Error(`no OpenAPI tag for ${path}`);
  return tag.name;
}

function operation(route: Route): JsonSchema {
  const isProtected = "permission" in route;
  return {
    operationId: route.handler.name,
    summary: route.summary,
    tags: [tagOf(route.path)],
    ...(isProtected ? { security: [{ bearer: [] }], "x-permission": route.permission } : { security: [] }),
    parameters: [
      ...(route.params ? pathParameters(route.params) : []),
      ...(route.query ? queryParameters(route.query) : []),
      { $ref: "#/components/parameters/RequestId" },
      ...(route.method === "POST" ? [{ $ref: "#/components/parameters/IdempotencyKey" }] : []),
    ],
    ...(route.body && {
      requestBody: {
        // No body at all counts as `{}`: only a schema with required fields makes one necessary.
        required: (route.body.required ?? []).length > 0,
        content: { "application/json": { schema: published(route.body) } },
      },
    }),
    responses: {
      [String(route.response.status)]: successResponse(route),
      ...Object.fromEntries(errorStatuses(route).map((s) => [String(s), { $ref: `#/components/responses/${ERRORS[s].name}` }])),
    },
  };
}

/** The OpenAPI 3.1 description of `routes`: what the app mounts is what is documented. */
export function openApiDocument(routes: readonly Route[], baseUrl: string): JsonSchema {
  const paths: Record<string, JsonSchema> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation(route) };
  }
  const used = new Set(routes.flatMap(errorStatuses));
  return {
    openapi: "3.1.0",
    info: {
      title: "Managed PostgreSQL API",
      version: "v1",
      description:
        "Success bodies are `{data, meta}` (lists: `data.<name>` and page meta); errors are " +
        "`{error: {code, message, details}, meta}`. Every response carries X-Request-Id and X-RateLimit-*. " +
        "Every POST accepts an Idempotency-Key header.",
      license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
    },
    servers: [{ url: baseUrl }],
    security: [{ bearer: [] }],
    tags: TAGS.map(({ name, description }) => ({ name, description })),
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "Login token (`dbs_…`) or API key (`dbk_…`)." } },
      schemas: SCHEMAS,
      responses: Object.fromEntries(
        (Object.keys(ERRORS).map(Number) as ErrorStatus[]).filter((s) => used.has(s)).map((s) => [ERRORS[s].name, errorResponse(s)]),
      ),
      headers: HEADERS,
      parameters: PARAMETERS,
    },
    paths,
  };
}
