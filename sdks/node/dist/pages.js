/**
 * What a list method returns: `await` it for one page, or iterate it with
 * `for await` for every item from that page on (pages fetched as needed).
 */
export class PageIterator {
    #fetch;
    #firstPage;
    #first;
    constructor(fetchPage, firstPage = 1) {
        this.#fetch = fetchPage;
        this.#firstPage = firstPage;
    }
    // biome-ignore lint/suspicious/noThenProperty: a list call is awaitable for its first page on purpose.
    then(onfulfilled, onrejected) {
        this.#first ??= this.#fetch(this.#firstPage);
        return this.#first.then(onfulfilled, onrejected);
    }
    async *[Symbol.asyncIterator]() {
        for (let n = this.#firstPage;; n++) {
            const page = await this.#fetch(n);
            yield* page.items;
            if (page.items.length === 0 || n >= page.meta.total_pages)
                return;
        }
    }
    /** Every item from this page on, in one array. */
    async all() {
        const items = [];
        for await (const item of this)
            items.push(item);
        return items;
    }
}
