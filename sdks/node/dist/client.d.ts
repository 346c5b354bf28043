import { ApiKeys, Auth, Organization } from "./resources/account.ts";
import { Billing, Catalogue } from "./resources/billing.ts";
import { Backups, Databases } from "./resources/databases.ts";
import { Pooler, TrustedSources } from "./resources/edge.ts";
import { Config, Dbs, Extensions, Logs, Queries, Roles } from "./resources/inside.ts";
import { Replicas } from "./resources/replicas.ts";
import { type ClientOptions, type RequestOptions, type ResponseInfo } from "./transport.ts";
import type { Schemas } from "./types.ts";
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
export declare class DbaasClient {
    #private;
    readonly auth: Auth;
    readonly databases: Databases;
    readonly backups: Backups;
    readonly replicas: Replicas;
    readonly trustedSources: TrustedSources;
    readonly pooler: Pooler;
    readonly roles: Roles;
    readonly dbs: Dbs;
    readonly config: Config;
    readonly extensions: Extensions;
    readonly logs: Logs;
    readonly queries: Queries;
    readonly catalogue: Catalogue;
    readonly organization: Organization;
    readonly apiKeys: ApiKeys;
    readonly billing: Billing;
    constructor(opts?: ClientOptions);
    /** The API address requests go to. */
    get baseUrl(): string;
    /** Status, request id, rate limit (X-RateLimit-*) and replay flag of the last response received, error or not. */
    get lastResponse(): ResponseInfo | undefined;
    /** Uses `token` (a login token or an API key) from the next request on. */
    setToken(token: string | undefined): void;
    /** This API's OpenAPI 3.1 description. */
    getOpenApiDocument(opts?: RequestOptions): Promise<Schemas["OpenApiDocument"]>;
}
