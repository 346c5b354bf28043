import type { Schemas } from "../types.ts";
import { type Context } from "./command.ts";
/**
 * Runs psql on `db` in this terminal and exits with its status. The
 * password is not retrievable from the API after create/reset-password: it
 * comes from --password or PGPASSWORD, else psql asks for it.
 */
export declare function psql(ctx: Context, db: Schemas["Database"], opts: {
    password: string | undefined;
    hostaddr: string | undefined;
    extra: string[];
}): Promise<void>;
