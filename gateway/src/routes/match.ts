import type { Method, Route } from "./route.ts";

/** Compiles a route path the way Express matches it here: case-sensitive, optional trailing slash. */
function pathPattern(path: string): RegExp {
  const source = path
    .split("/")
    .map((segment) => (segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${source}/?$`);
}

/** Which methods the route table serves on a concrete path (empty: the path is unknown). */
export function methodsByPath(routes: readonly Route[]): (path: string) => Method[] {
  const patterns = routes.map((r) => ({ method: r.method, pattern: pathPattern(r.path) }));
  return (path) => patterns.filter((p) => p.pattern.test(path)).map((p) => p.method);
}
