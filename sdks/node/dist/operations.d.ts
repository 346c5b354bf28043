import type { PageIterator } from "./pages.ts";
import type { OperationId, Query } from "./types.ts";
/**
 * The method that performs each operation of the API, by `operationId`. The
 * type makes tsc fail when the document gains an operation this client lacks;
 * test/sdks/contract.test.ts checks the same against the served document for
 * the three clients.
 */
export declare const OPERATIONS: Record<OperationId, (...args: never[]) => unknown>;
/** The operations whose answer is one page of a list (they take a `page` query parameter). */
export type PagedOperationId = {
    [K in OperationId]: [Query<K>] extends [never] ? never : "page" extends keyof Query<K> ? K : never;
}[OperationId];
/**
 * The list method of each paged operation: its return type makes tsc fail
 * when one answers a plain promise instead of a `PageIterator` (`await` for a
 * page, `for await` for every item); test/sdks/contract.test.ts checks the
 * keys against the document, and that the three clients iterate them all.
 */
export declare const PAGED: Record<PagedOperationId, (...args: never[]) => PageIterator<unknown>>;
