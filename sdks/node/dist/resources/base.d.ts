import { PageIterator } from "../pages.ts";
import type { RequestOptions, Transport } from "../transport.ts";
/** A path segment from a caller's id: never able to reach another route. */
export declare const seg: (id: string) => string;
/** What every resource of the client (`client.databases`, …) is: its API's methods, nothing else. */
export declare abstract class Resource {
    constructor(transport: Transport);
}
export declare function data<T>(resource: Resource, method: string, path: string, body?: unknown, opts?: RequestOptions, query?: object): Promise<T>;
export declare function none(resource: Resource, method: string, path: string, opts?: RequestOptions): Promise<void>;
export declare function bytes(resource: Resource, path: string, opts?: RequestOptions): Promise<Uint8Array>;
/** A list at `path` whose `data[key]` holds the items; the rest of `data` comes along on each page. */
export declare function paged<T, Extra = unknown>(resource: Resource, path: string, key: string, query?: {
    page?: number;
} & object, opts?: RequestOptions): PageIterator<T, Extra>;
