import { ApiKeys, Auth, Organization } from "./resources/account.js";
import { Billing, Catalogue } from "./resources/billing.js";
import { Backups, Databases } from "./resources/databases.js";
import { Pooler, TrustedSources } from "./resources/edge.js";
import { Config, Dbs, Extensions, Logs, Queries, Roles } from "./resources/inside.js";
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
    trustedSources;
    pooler;
    roles;
    dbs;
    config;
    extensions;
    logs;
    queries;
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
        this.trustedSources = new TrustedSources(t);
        this.pooler = new Pooler(t);
        this.roles = new Roles(t);
        this.dbs = new Dbs(t);
        this.config = new Config(t);
        this.extensions = new Extensions(t);
        this.logs = new Logs(t);
        this.queries = new Queries(t);
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
