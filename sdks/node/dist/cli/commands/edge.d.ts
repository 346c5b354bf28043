import { type Group } from "../command.ts";
/** `dbaas databases trusted-sources …`: who may connect to a database. */
export declare const trustedSources: Group;
/** `dbaas databases pooler …`: the database's PgBouncer. */
export declare const pooler: Group;
