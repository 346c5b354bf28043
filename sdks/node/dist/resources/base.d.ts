import { PageIterator } from "../pages.ts";
import type { RequestOptions, Transport } from "../transport.ts";
/** A path segment from a caller's id: never able to reach another route. */
export declare const seg: (id: string) => string;
/** The shared plumbing of every resource: `data` of the envelope, lists as PageIterator. */
export declare abstract class Resource {
    protected readonly transport: Transport;
    constructor(transport: Transport);
    protected data<T>(method: string, path: string, body?: unknown, opts?: RequestOptions, query?: object): Promise<T>;
    protected none(method: string, path: string, opts?: RequestOptions): Promise<void>;
    protected bytes(path: string, opts?: RequestOptions): Promise<Uint8Array>;
    /** A list at `path` whose `data[key]` holds the items; the rest of `data` comes along on each page. */
    protected paged<T, Extra = unknown>(path: string, key: string, query?: {
        page?: number;
    } & object, opts?: RequestOptions): PageIterator<T, Extra>;
}
