import type { BodySchema, FieldType, QuerySchema } from "../schema.ts";
import type { Route } from "./route.ts";

type Json = Record<string, unknown>;

function fieldSchema(type: FieldType): Json {
  switch (type) {
    case "string":
    case "number":
    case "integer":
    case "boolean":
      return { type };
    case "date-time":
      return { type: "string", format: "date-time" };
    case "string[]":
      return { type: "array", items: { type: "string" } };
  }
}

function bodySchema(body: BodySchema): Json {
  return {
    type: "object",
    properties: Object.fromEntries(
      Object.entries(body).map(([name, spec]) => [name, { ...fieldSchema(spec.type), description: spec.description }]),
    ),
    required: Object.entries(body)
      .filter(([, spec]) => spec.required)
      .map(([name]) => name),
  };
}

function queryParameters(query: QuerySchema): Json[] {
  return Object.entries(query).map(([name, spec]) => ({
    name,
    in: "query",
    required: false,
    description: spec.description,
    schema: { type: spec.type },
  }));
}

const ERROR_STATUSES: Record<string, string> = {
  "400": "Malformed request: unparseable JSON, wrong content type, or a query value of the wrong type.",
  "401": "Missing, malformed, unknown, expired or revoked credential.",
  "402": "The organization must add a payment method first.",
  "403": "The credential lacks the permission the route requires.",
  "404": "No such resource in the caller's organization, or no such route.",
  "409": "Conflict with the resource's current state.",
  "413": "Request body over 1 MB.",
  "422": "Well-formed request that failed validation; `details` names each field.",
  "429": "Rate limit exceeded; see Retry-After.",
  "500": "Internal error.",
  "503": "Maintenance or an internal service unavailable; see Retry-After.",
};

const COMPONENTS = {
  securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "Login token or API key." } },
  schemas: {
    Meta: {
      type: "object",
      properties: { request_id: { type: "string" } },
      required: ["request_id"],
    },
    ListMeta: {
      type: "object",
      properties: {
        request_id: { type: "string" },
        page: { type: "integer" },
        per_page: { type: "integer" },
        total: { type: "integer" },
        total_pages: { type: "integer" },
      },
      required: ["request_id", "page", "per_page", "total", "total_pages"],
    },
    Error: {
      type: "object",
      properties: {
        error: {
          type: "object",
          properties: {
            code: { type: "string" },
            message: { type: "string" },
            details: {
              type: "array",
              items: {
                type: "object",
                properties: { field: { type: "string" }, message: { type: "string" } },
                required: ["field", "message"],
              },
            },
          },
          required: ["code", "message", "details"],
        },
        meta: { $ref: "#/components/schemas/Meta" },
      },
      required: ["error", "meta"],
    },
  },
  responses: {
    Error: {
      description: "Error envelope.",
      content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
    },
  },
  headers: {
    RequestId: { schema: { type: "string" }, description: "Echo of a sane client X-Request-Id, or a new one." },
    RateLimitLimit: { schema: { type: "integer" } },
    RateLimitRemaining: { schema: { type: "integer" } },
    RateLimitReset: { schema: { type: "integer" }, description: "Unix time, seconds." },
  },
};

const COMMON_HEADERS = {
  "X-Request-Id": { $ref: "#/components/headers/RequestId" },
  "X-RateLimit-Limit": { $ref: "#/components/headers/RateLimitLimit" },
  "X-RateLimit-Remaining": { $ref: "#/components/headers/RateLimitRemaining" },
  "X-RateLimit-Reset": { $ref: "#/components/headers/RateLimitReset" },
};

const IDEMPOTENCY_KEY = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "Makes a retry safe: the first response is replayed for 24 h (Idempotent-Replayed: true); " +
    "reusing the key for a different request is 422, while the first is still running 409.",
  schema: { type: "string", minLength: 1, maxLength: 255 },
};

function successResponse(route: Route): Json {
  if (route.success === 204) return { description: "Done; no body.", headers: COMMON_HEADERS };
  if (route.produces) {
    return { description: route.summary, headers: COMMON_HEADERS, content: { [route.produces]: { schema: { type: "string" } } } };
  }
  const paginated = route.query !== undefined && "per_page" in route.query;
  const meta = paginated ? "#/components/schemas/ListMeta" : "#/components/schemas/Meta";
  return {
    description: route.summary,
    headers: COMMON_HEADERS,
    content: {
      "application/json": {
        schema: { type: "object", properties: { data: { type: "object" }, meta: { $ref: meta } }, required: ["data", "meta"] },
      },
    },
  };
}

function operation(route: Route): Json {
  const isProtected = "permission" in route;
  const pathParams = [...route.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => ({
    name: m[1],
    in: "path",
    required: true,
    schema: { type: "string" },
  }));
  const errors = Object.keys(ERROR_STATUSES).filter(
    (s) => isProtected || !["401", "402", "403"].includes(s),
  );
  return {
    operationId: route.handler.name,
    summary: route.summary,
    ...(isProtected ? { security: [{ bearer: [] }], "x-permission": route.permission } : { security: [] }),
    parameters: [
      ...pathParams,
      ...(route.query ? queryParameters(route.query) : []),
      ...(route.method === "POST" ? [IDEMPOTENCY_KEY] : []),
    ],
    ...(route.body && {
      requestBody: { required: true, content: { "application/json": { schema: bodySchema(route.body) } } },
    }),
    responses: {
      [String(route.success)]: successResponse(route),
      ...Object.fromEntries(errors.map((s) => [s, { $ref: "#/components/responses/Error", description: ERROR_STATUSES[s] }])),
    },
  };
}

/** The OpenAPI 3.1 description of `routes`: what the app mounts is what is documented. */
export function openApiDocument(routes: readonly Route[], baseUrl: string): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation(route) };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Managed PostgreSQL API",
      version: "v1",
      description:
        "Success bodies are {data, meta}; errors are {error: {code, message, details}, meta}. " +
        "Every POST accepts an Idempotency-Key header (replayed for 24 h).",
    },
    servers: [{ url: baseUrl }],
    security: [{ bearer: [] }],
    components: COMPONENTS,
    paths,
  };
}
