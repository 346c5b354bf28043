import { type Page, PageIterator } from "../pages.ts";
import type { RequestOptions, Transport } from "../transport.ts";

/** A path segment from a caller's id: never able to reach another route. */
export const seg = (id: string): string => encodeURIComponent(id);

type QueryValues = Record<string, string | number | boolean | undefined>;

/** The shared plumbing of every resource: `data` of the envelope, lists as PageIterator. */
export abstract class Resource {
  protected readonly transport: Transport;

  constructor(transport: Transport) {
    this.transport = transport;
  }

  protected async data<T>(method: string, path: string, body?: unknown, opts: RequestOptions = {}, query?: object): Promise<T> {
    const answer = await this.transport.request(method, path, { ...opts, body, query: query as QueryValues | undefined });
    return answer.json?.data as T;
  }

  protected async none(method: string, path: string, opts: RequestOptions = {}): Promise<void> {
    await this.transport.request(method, path, opts);
  }

  protected async bytes(path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    return (await this.transport.request("GET", path, opts)).bytes ?? new Uint8Array();
  }

  /** A list at `path` whose `data[key]` holds the items; the rest of `data` comes along on each page. */
  protected paged<T, Extra = unknown>(
    path: string,
    key: string,
    query: { page?: number } & object = {},
    opts: RequestOptions = {},
  ): PageIterator<T, Extra> {
    const { page = 1, ...rest } = query;
    return new PageIterator<T, Extra>(async (n) => {
      const answer = await this.transport.request("GET", path, { ...opts, query: { ...(rest as QueryValues), page: n } });
      const { [key]: items, ...extra } = answer.json.data as Record<string, unknown>;
      return { ...extra, items: items as T[], meta: answer.json.meta } as Page<T, Extra>;
    }, page);
  }
}
