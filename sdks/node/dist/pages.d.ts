import type { ListMeta } from "./types.ts";
/** One page of a list: its items and `meta` (page, per_page, total, total_pages, request_id), plus any list-wide fields. */
export type Page<T, Extra = unknown> = {
    items: T[];
    meta: ListMeta;
} & Extra;
/**
 * What a list method returns: `await` it for one page, or iterate it with
 * `for await` for every item from that page on (pages fetched as needed).
 */
export declare class PageIterator<T, Extra = unknown> implements PromiseLike<Page<T, Extra>>, AsyncIterable<T> {
    #private;
    constructor(fetchPage: (page: number) => Promise<Page<T, Extra>>, firstPage?: number);
    then<R1 = Page<T, Extra>, R2 = never>(onfulfilled?: ((page: Page<T, Extra>) => R1 | PromiseLike<R1>) | null, onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null): Promise<R1 | R2>;
    [Symbol.asyncIterator](): AsyncIterator<T>;
    /** Every item from this page on, in one array. */
    all(): Promise<T[]>;
}
