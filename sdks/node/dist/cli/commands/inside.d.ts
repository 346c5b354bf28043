import type { Schemas } from "../../types.ts";
import { type Command, type Group } from "../command.ts";
export declare const roles: Group;
export declare const dbs: Group;
export declare const config: Group;
export declare const extensions: Group;
type LogEntry = Schemas["LogPage"]["entries"][number];
/** One log entry as a line: time, severity, SQLSTATE, who, the message, and the statement that failed. */
export declare function logLine(e: LogEntry): string;
export declare const logs: Command;
export declare const queries: Group;
export {};
