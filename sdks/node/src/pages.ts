import type { ListMeta } from "./types.ts";

/** One page of a list: its items and `meta` (page, per_page, total, total_pages, request_id), plus any list-wide fields. */
export type Page<T, Extra = unknown> = { items: T[]; meta: ListMeta } & Extra;

/**
 * What a list method returns: `await` it for one page, or iterate it with
 * `for await` for every item from that page on (pages fetched as needed).
 */
export class PageIterator<T, Extra = unknown> implements PromiseLike<Page<T, Extra>>, AsyncIterable<T> {
  readonly #fetch: (page: number) => Promise<Page<T, Extra>>;
  readonly #firstPage: number;
  #first: Promise<Page<T, Extra>> | undefined;

  constructor(fetchPage: (page: number) => Promise<Page<T, Extra>>, firstPage = 1) {
    this.#fetch = fetchPage;
    this.#firstPage = firstPage;
  }

  // biome-ignore lint/suspicious/noThenProperty: a list call is awaitable for its first page on purpose.
  then<R1 = Page<T, Extra>, R2 = never>(
    onfulfilled?: ((page: Page<T, Extra>) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    this.#first ??= this.#fetch(this.#firstPage);
    return this.#first.then(onfulfilled, onrejected);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (let n = this.#firstPage; ; n++) {
      const page = await this.#fetch(n);
      yield* page.items;
      if (page.items.length === 0 || n >= page.meta.total_pages) return;
    }
  }

  /** Every item from this page on, in one array. */
  async all(): Promise<T[]> {
    const items: T[] = [];
    for await (const item of this) items.push(item);
    return items;
  }
}
