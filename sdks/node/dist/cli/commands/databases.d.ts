import type { DatabaseStatus, Schemas } from "../../types.ts";
import { type Context, type Group } from "../command.ts";
import type { Column } from "../output.ts";
type ListItem = Schemas["DatabaseListItem"];
export declare const DATABASE_COLUMNS: Column<ListItem>[];
/** --wait: polls until `status`, with a spinner on a terminal and plain lines otherwise (on stderr). */
export declare function waitFor(ctx: Context, id: string, status: DatabaseStatus): Promise<Schemas["Database"]>;
export declare const databases: Group;
export {};
