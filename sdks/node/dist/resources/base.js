import { PageIterator } from "../pages.js";
/** A path segment from a caller's id: never able to reach another route. */
export const seg = (id) => encodeURIComponent(id);
/**
 * Every resource's transport, kept out of the object: a resource lists only its methods (no `transport`
 * property, no plumbing on its prototype) and its published type has nothing but them.
 */
const transports = new WeakMap();
/** What every resource of the client (`client.databases`, …) is: its API's methods, nothing else. */
export class Resource {
    constructor(transport) {
        transports.set(this, transport);
    }
}
// The shared plumbing of the resources, as functions of this module (which index.ts does not export) rather than
// members: `data` of the envelope, nothing, the bytes of a download, lists as PageIterator.
function transportOf(resource) {
    return transports.get(resource);
}
export async function data(resource, method, path, body, opts = {}, query) {
    const answer = await transportOf(resource).request(method, path, { ...opts, body, query: query });
    return answer.json?.data;
}
export async function none(resource, method, path, opts = {}) {
    await transportOf(resource).request(method, path, opts);
}
export async function bytes(resource, path, opts = {}) {
    return (await transportOf(resource).request("GET", path, opts)).bytes ?? new Uint8Array();
}
/** A list at `path` whose `data[key]` holds the items; the rest of `data` comes along on each page. */
export function paged(resource, path, key, query = {}, opts = {}) {
    const { page = 1, ...rest } = query;
    const transport = transportOf(resource);
    return new PageIterator(async (n) => {
        const answer = await transport.request("GET", path, { ...opts, query: { ...rest, page: n } });
        const { [key]: items, ...extra } = answer.json.data;
        return { ...extra, items: items, meta: answer.json.meta };
    }, page);
}
