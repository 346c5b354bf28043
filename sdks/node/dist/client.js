import { ApiKeys, Auth, Organization } from "./resources/account.js";
import { Billing, Catalogue } from "./resources/billing.js";
import { Backups, Databases } from "./resources/databases.js";
import { Replicas } from "./resources/replicas.js";
import { Transport } from "./transport.js";
/**
 * The managed PostgreSQL API. Every method returns a promise of the answer's
 * `data` (envelope unwrapped) and throws `DbaasError` for an error answer,
 * `DbaasConnectionError` when the API cannot be reached.
 *
 * ```ts
 * const client = new DbaasClient({ token: process.env.DBAAS_TOKEN });
 * for await (const db of client.databases.list()) console.log(db.id, db.status);
 * ```
 */
export class DbaasClient {
    #transport;
    auth;
    databases;
    backups;
    replicas;
    catalogue;
    organization;
    apiKeys;
    billing;
    constructor(opts = {}) {
        const t = new Transport(opts);
        this.#transport = t;
        this.auth = new Auth(t);
        this.databases = new Databases(t);
        this.backups = new Backups(t);
        this.replicas = new Replicas(t);
        this.catalogue = new Catalogue(t);
        this.organization = new Organization(t);
        this.apiKeys = new ApiKeys(t);
        this.billing = new Billing(t);
    }
    /** The API address requests go to. */
    get baseUrl() {
        return this.#transport.baseUrl;
    }
    /** Status, request id, rate limit (X-RateLimit-*) and replay flag of the last response received, error or not. */
    get lastResponse() {
        return this.#transport.lastResponse;
    }
    /** Uses `token` (a login token or an API key) from the next request on. */
    setToken(token) {
        this.#transport.token = token;
    }
    /** This API's OpenAPI 3.1 description. */
    async getOpenApiDocument(opts) {
        return (await this.#transport.request("GET", "/v1/openapi.json", opts)).json;
    }
}
