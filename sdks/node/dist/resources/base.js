import { PageIterator } from "../pages.js";
/** A path segment from a caller's id: never able to reach another route. */
export const seg = (id) => encodeURIComponent(id);
/** The shared plumbing of every resource: `data` of the envelope, lists as PageIterator. */
export class Resource {
    transport;
    constructor(transport) {
        this.transport = transport;
    }
    async data(method, path, body, opts = {}, query) {
        const answer = await this.transport.request(method, path, { ...opts, body, query: query });
        return answer.json?.data;
    }
    async none(method, path, opts = {}) {
        await this.transport.request(method, path, opts);
    }
    async bytes(path, opts = {}) {
        return (await this.transport.request("GET", path, opts)).bytes ?? new Uint8Array();
    }
    /** A list at `path` whose `data[key]` holds the items; the rest of `data` comes along on each page. */
    paged(path, key, query = {}, opts = {}) {
        const { page = 1, ...rest } = query;
        return new PageIterator(async (n) => {
            const answer = await this.transport.request("GET", path, { ...opts, query: { ...rest, page: n } });
            const { [key]: items, ...extra } = answer.json.data;
            return { ...extra, items: items, meta: answer.json.meta };
        }, page);
    }
}
