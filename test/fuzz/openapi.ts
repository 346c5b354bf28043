/**
 * The operations of the served OpenAPI document, read at run time: every
 * path and method with its path parameters, query parameters and body
 * properties, so the fuzz covers what the gateway says it serves today.
 */
export type Json = Record<string, any>;

export interface Param {
  name: string;
  schema: Json;
  required: boolean;
}

export interface Operation {
  method: string;
  /** As in the document: `/v1/databases/{id}`. */
  path: string;
  pathParams: Param[];
  query: Param[];
  /** The JSON body schema, `$ref`s resolved (none for operations without a body). */
  body?: Json;
  bodyRequired: boolean;
  /** True when the operation takes a bearer credential. */
  secured: boolean;
}

const METHODS = ["get", "post", "put", "patch", "delete"];

/** Resolves `$ref`s (local ones) and merges `allOf`, deeply, with a guard against cycles. */
export function resolver(doc: Json): (schema: Json | undefined) => Json {
  const at = (ref: string): Json => {
    if (!ref.startsWith("#/")) throw new Error(`only local $refs are followed, got ${ref}`);
    let node: any = doc;
    for (const part of ref.slice(2).split("/")) node = node?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    if (node === undefined) throw new Error(`$ref ${ref} points nowhere`);
    return node as Json;
  };
  const resolve = (schema: Json | undefined, depth = 0): Json => {
    if (schema === undefined || typeof schema !== "object" || schema === null) return {};
    if (depth > 20) return {};
    let s: Json = schema;
    if (typeof s.$ref === "string") {
      const { $ref, ...rest } = s;
      s = { ...resolve(at($ref), depth + 1), ...rest };
    }
    if (Array.isArray(s.allOf)) {
      const { allOf, ...rest } = s;
      const parts = (allOf as Json[]).map((p) => resolve(p, depth + 1));
      const merged: Json = { ...rest, properties: { ...rest.properties }, required: [...(rest.required ?? [])] };
      for (const p of parts) {
        const { properties, required, ...other } = p;
        Object.assign(merged, other);
        Object.assign(merged.properties, properties);
        merged.required.push(...(required ?? []));
      }
      if (Object.keys(merged.properties).length === 0) delete merged.properties;
      if (merged.required.length === 0) delete merged.required;
      s = merged;
    }
    const out: Json = { ...s };
    if (s.properties) out.properties = Object.fromEntries(Object.entries<Json>(s.properties).map(([k, v]) => [k, resolve(v, depth + 1)]));
    if (s.items) out.items = resolve(s.items, depth + 1);
    for (const key of ["anyOf", "oneOf"]) if (Array.isArray(s[key])) out[key] = (s[key] as Json[]).map((p) => resolve(p, depth + 1));
    return out;
  };
  return resolve;
}

export function operationsOf(doc: Json): Operation[] {
  const resolve = resolver(doc);
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<Json>(doc.paths ?? {})) {
    const shared: Json[] = item.parameters ?? [];
    for (const method of METHODS) {
      const op: Json | undefined = item[method];
      if (!op) continue;
      const params = [...shared, ...(op.parameters ?? [])].map((p) => resolve(p));
      const body = op.requestBody ? resolve(op.requestBody) : undefined;
      const json = body?.content?.["application/json"]?.schema;
      const security: Json[] = op.security ?? doc.security ?? [];
      ops.push({
        method: method.toUpperCase(),
        path,
        pathParams: [...path.matchAll(/\{([^}]+)\}/g)].map((m) => {
          const declared = params.find((p) => p.in === "path" && p.name === m[1]);
          return { name: m[1]!, schema: resolve(declared?.schema), required: true };
        }),
        query: params
          .filter((p) => p.in === "query")
          .map((p) => ({ name: p.name, schema: resolve(p.schema), required: p.required === true })),
        body: json ? resolve(json) : undefined,
        bodyRequired: body?.required === true,
        secured: security.some((s) => Object.keys(s).length > 0),
      });
    }
  }
  return ops;
}

/** The public error codes the document allows in an error body. */
export function publicCodes(doc: Json): Set<string> {
  const codes = doc.components?.schemas?.Error?.properties?.error?.properties?.code?.enum;
  return new Set(Array.isArray(codes) ? codes : []);
}
