import type { Method } from "./route.ts";

interface Node<T> {
  literal: Map<string, Node<T>>;
  param?: { name: string; node: Node<T> };
  byMethod: Map<Method, T>;
}

const node = <T>(): Node<T> => ({ literal: new Map(), byMethod: new Map() });

export type Match<T> =
  | { kind: "found"; value: T; params: Record<string, string> }
  /** The path exists but not for this method; `allow` lists its methods, HEAD included where GET is. */
  | { kind: "method"; allow: string[] }
  | { kind: "none" };

export interface RouteTable<T> {
  match(method: string, path: string): Match<T>;
  /** Which methods the table serves on a concrete path (empty: the path is unknown). */
  methodsOf(path: string): Method[];
}

/** Thrown for a parameter that is not valid percent-encoding, as Express's router does. */
export class MalformedParamError extends Error {
  readonly status = 400;
}

/**
 * The route table as a tree of path segments, matched the way Express's
 * router matches these paths (case-sensitive, one optional trailing slash,
 * `:name` taking one non-empty segment, percent-decoded; HEAD served by GET),
 * but in one walk over the segments instead of one regular expression per
 * declared route, tried in order, per request. Kept by hand for measured
 * speed: `npm run bench:gateway`, docs/benchmarks.md ("One route table").
 */
export function createRouteTable<T>(routes: ReadonlyArray<{ method: Method; path: string; value: T }>): RouteTable<T> {
  const root = node<T>();
  for (const route of routes) {
    let at = root;
    for (const segment of route.path.split("/").slice(1)) {
      if (segment.startsWith(":")) {
        const name = segment.slice(1);
        if (at.param && at.param.name !== name) throw new Error(`${route.path}: parameter :${name} clashes with :${at.param.name}`);
        at.param ??= { name, node: node<T>() };
        at = at.param.node;
      } else {
        let next = at.literal.get(segment);
        if (!next) {
          next = node<T>();
          at.literal.set(segment, next);
        }
        at = next;
      }
    }
    if (at.byMethod.has(route.method)) throw new Error(`${route.method} ${route.path} declared twice`);
    at.byMethod.set(route.method, route.value);
  }

  /** The node a path leads to, literal segments preferred over parameters, with the raw parameter values. */
  const walk = (segments: string[], i: number, at: Node<T>, raw: Array<[string, string]>): Node<T> | undefined => {
    if (i === segments.length) return at.byMethod.size > 0 ? at : undefined;
    const segment = segments[i]!;
    const literal = at.literal.get(segment);
    const found = literal && walk(segments, i + 1, literal, raw);
    if (found) return found;
    if (!at.param || segment === "") return undefined;
    raw.push([at.param.name, segment]);
    const viaParam = walk(segments, i + 1, at.param.node, raw);
    if (!viaParam) raw.pop();
    return viaParam;
  };

  const find = (path: string, raw: Array<[string, string]>): Node<T> | undefined => {
    if (path[0] !== "/") return undefined;
    const segments = path.split("/");
    // "/a/b/" matches "/a/b"; "/" alone is the root's one empty segment.
    if (segments.length > 2 && segments[segments.length - 1] === "") segments.pop();
    return walk(segments, 1, root, raw);
  };

  return {
    match(method, path) {
      const raw: Array<[string, string]> = [];
      const target = find(path, raw);
      if (!target) return { kind: "none" };
      const value = target.byMethod.get(method as Method) ?? (method === "HEAD" ? target.byMethod.get("GET") : undefined);
      if (value === undefined) {
        const allow: string[] = [...target.byMethod.keys()];
        if (allow.includes("GET")) allow.push("HEAD");
        return { kind: "method", allow };
      }
      const params: Record<string, string> = {};
      for (const [name, encoded] of raw) {
        try {
          params[name] = decodeURIComponent(encoded);
        } catch {
          throw new MalformedParamError(`failed to decode parameter ${name}`);
        }
      }
      return { kind: "found", value, params };
    },
    methodsOf(path) {
      const target = find(path, []);
      return target ? [...target.byMethod.keys()] : [];
    },
  };
}
