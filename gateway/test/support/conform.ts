import type { Route } from "../../src/routes/route.ts";
import type { ApiResponse } from "./gateway.ts";

/**
 * What the stub-conformance tests (stubs-conform*.test.ts) compare of an
 * answer: the status and, for a success, the body's shape (its keys and value
 * types, not the values); for an error, its code and the fields its details name.
 */
export function answer(res: ApiResponse) {
  const error = res.body?.error;
  return {
    status: res.status,
    ...(error
      ? { code: error.code, fields: (error.details ?? []).map((d: { field: string }) => d.field).sort() }
      : { shape: shape(res.body ?? res.headers.get("content-type")) }),
  };
}

function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? [] : [shape(value[0])];
  if (value === null || typeof value !== "object") return typeof value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>)
      .filter(([k]) => k !== "request_id")
      .map(([k, v]) => [k, shape(v)])
      .sort(([a], [b]) => String(a).localeCompare(String(b))),
  );
}

/**
 * The route's path with every parameter an id of the right form that names
 * nothing (`<prefix>-nothing0`, the prefix from the parameter's schema), or
 * the value `fixed` gives for its name.
 */
export function pathNamingNothing(route: Route, fixed: Record<string, string> = {}): string {
  return route.path.replace(/:(\w+)/g, (_, name: string) => {
    if (fixed[name]) return fixed[name];
    const pattern = route.params?.[name]?.schema.pattern;
    const prefix = pattern ? /^\^([a-z]+)-/.exec(pattern)?.[1] : undefined;
    return `${prefix ?? name}-nothing0`;
  });
}
