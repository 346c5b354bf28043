import type { DbaasClient } from "../client.ts";
import type { CliConfig } from "./config.ts";
import { type Column } from "./output.ts";
/** Wrong invocation: exit code 2, with a pointer to --help. */
export declare class UsageError extends Error {
}
/** A failure found by the CLI itself (not logged in, psql missing, …): exit code 1. */
export declare class CliError extends Error {
}
export interface OptionSpec {
    type: "string" | "boolean";
    short?: string;
    multiple?: boolean;
    /** Shown in --help, e.g. `NAME`. */
    value?: string;
    description: string;
}
export interface Context {
    client: DbaasClient;
    output: "table" | "json";
    env: NodeJS.ProcessEnv;
    stdout: NodeJS.WriteStream;
    stderr: NodeJS.WriteStream;
    configPath: string;
    config: CliConfig;
}
export interface Args {
    values: Record<string, string | boolean | string[] | undefined>;
    positionals: string[];
}
export interface Command {
    summary: string;
    /** After `dbaas <group> <command>`, e.g. `<database-id> --tier TIER`. */
    usage: string;
    options?: Record<string, OptionSpec>;
    /** Names of the required positional arguments, in order. */
    args?: string[];
    /** More positionals allowed after the required ones (`databases psql <id> -- <psql options>`). */
    rest?: boolean;
    examples: string[];
    run(ctx: Context, args: Args): Promise<void>;
}
export interface Group {
    summary: string;
    /** Commands, and groups of their own one level down (`databases trusted-sources list`). */
    commands: Record<string, Command | Group>;
}
export declare const isGroup: (x: Group | Command) => x is Group;
export declare const WAIT: OptionSpec;
/** A required option's value, or a usage error naming it. */
export declare function need(args: Args, name: string): string;
export declare const optional: (args: Args, name: string) => string | undefined;
/** Prints `data` as JSON with --output json, otherwise as a table of `columns` (a list) or `key: value` lines. */
export declare function print<T extends object>(ctx: Context, data: T | T[], columns?: Column<T>[]): void;
/** A human sentence (suppressed with --output json, where only the data is printed). */
export declare function say(ctx: Context, line: string): void;
/** What a command that answers no data did: `line` for a person, the object `json` with --output json. */
export declare function outcome(ctx: Context, json: object, line: string): void;
export declare const GLOBAL_OPTIONS: Record<string, OptionSpec>;
export declare function commandHelp(path: string, cmd: Command): string;
/** A group's commands and, as its examples, the first example of each. */
export declare function groupHelp(name: string, group: Group): string;
