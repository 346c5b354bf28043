import { type Page, PageIterator } from "../pages.ts";
import type { RequestOptions, Transport } from "../transport.ts";

/** A path segment from a caller's id: never able to reach another route. */
export const seg = (id: string): string => encodeURIComponent(id);

type QueryValues = Record<string, string | number | boolean | undefined>;

/**
 * Every resource's transport, kept out of the object: a resource lists only its methods (no `transport`
 * property, no plumbing on its prototype) and its published type has nothing but them.
 */
const transports = new WeakMap<Resource, Transport>();

/** What every resource of the client (`client.databases`, …) is: its API's methods, nothing else. */
export abstract class Resource {
  constructor(transport: Transport) {
    transports.set(this, transport);
  }
}

// The shared plumbing of the resources, as functions of this module (which index.ts does not export) rather than
// members: `data` of the envelope, nothing, the bytes of a download, lists as PageIterator.

function transportOf(resource: Resource): Transport {
  return transports.get(resource)!;
}

export async function data<T>(
  resource: Resource,
  method: string,
  path: string,
  body?: unknown,
  opts: RequestOptions = {},
  query?: object,
): Promise<T> {
  const answer = await transportOf(resource).request(method, path, { ...opts, body, query: query as QueryValues | undefined });
  return answer.json?.data as T;
}

export async function none(resource: Resource, method: string, path: string, opts: RequestOptions = {}): Promise<void> {
  await transportOf(resource).request(method, path, opts);
}

export async function bytes(resource: Resource, path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
  return (await transportOf(resource).request("GET", path, opts)).bytes ?? new Uint8Array();
}

/** A list at `path` whose `data[key]` holds the items; the rest of `data` comes along on each page. */
export function paged<T, Extra = unknown>(
  resource: Resource,
  path: string,
  key: string,
  query: { page?: number } & object = {},
  opts: RequestOptions = {},
): PageIterator<T, Extra> {
  const { page = 1, ...rest } = query;
  const transport = transportOf(resource);
  return new PageIterator<T, Extra>(async (n) => {
    const answer = await transport.request("GET", path, { ...opts, query: { ...(rest as QueryValues), page: n } });
    const { [key]: items, ...extra } = answer.json.data as Record<string, unknown>;
    return { ...extra, items: items as T[], meta: answer.json.meta } as Page<T, Extra>;
  }, page);
}
