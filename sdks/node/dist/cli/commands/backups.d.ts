import { type Command, type Group } from "../command.ts";
export declare const backups: Group;
export declare const restore: Command;
