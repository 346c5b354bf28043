import type { DbaasClient } from "../client.ts";
import type { CliConfig } from "./config.ts";
import { type Column, record, table } from "./output.ts";

/** Wrong invocation: exit code 2, with a pointer to --help. */
export class UsageError extends Error {}

/** A failure found by the CLI itself (not logged in, psql missing, …): exit code 1. */
export class CliError extends Error {}

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

export const isGroup = (x: Group | Command): x is Group => "commands" in x;

export const WAIT: OptionSpec = { type: "boolean", description: "Wait until the change is done, showing progress." };

/** A required option's value, or a usage error naming it. */
export function need(args: Args, name: string): string {
  const v = args.values[name];
  if (typeof v !== "string" || v === "") throw new UsageError(`--${name} is required`);
  return v;
}

export const optional = (args: Args, name: string): string | undefined => {
  const v = args.values[name];
  return typeof v === "string" ? v : undefined;
};

/** Prints `data` as JSON with --output json, otherwise as a table of `columns` (a list) or `key: value` lines. */
export function print<T extends object>(ctx: Context, data: T | T[], columns?: Column<T>[]): void {
  if (ctx.output === "json") ctx.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
  else if (Array.isArray(data)) ctx.stdout.write(columns ? table(data, columns) : data.map((d) => record(d)).join("\n"));
  else ctx.stdout.write(record(data));
}

/** A human sentence (suppressed with --output json, where only the data is printed). */
export function say(ctx: Context, line: string): void {
  if (ctx.output !== "json") ctx.stdout.write(`${line}\n`);
}

/** What a command that answers no data did: `line` for a person, the object `json` with --output json. */
export function outcome(ctx: Context, json: object, line: string): void {
  if (ctx.output === "json") print(ctx, json);
  else say(ctx, line);
}

function optionLines(options: Record<string, OptionSpec>): string[] {
  const rows = Object.entries(options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : "    "}--${name}${o.type === "string" ? ` ${o.value ?? "VALUE"}` : ""}`;
    return [flag, o.description + (o.multiple ? " (repeatable)" : "")] as const;
  });
  const width = Math.max(...rows.map(([f]) => f.length));
  return rows.map(([f, d]) => `  ${f.padEnd(width)}   ${d}`);
}

export const GLOBAL_OPTIONS: Record<string, OptionSpec> = {
  url: { type: "string", value: "URL", description: "API address (default: $DBAAS_URL, the config file, http://127.0.0.1:8080)" },
  output: { type: "string", short: "o", value: "FORMAT", description: "table (default) or json" },
  help: { type: "boolean", short: "h", description: "Show help" },
};

export function commandHelp(path: string, cmd: Command): string {
  return [
    `${cmd.summary}`,
    "",
    `Usage: dbaas ${path} ${cmd.usage}`.trimEnd(),
    ...(cmd.options ? ["", "Options:", ...optionLines(cmd.options)] : []),
    "",
    "Global options:",
    ...optionLines(GLOBAL_OPTIONS),
    "",
    "Examples:",
    ...cmd.examples.map((e) => `  $ ${e}`),
    "",
  ].join("\n");
}

/** A group's commands and, as its examples, the first example of each. */
export function groupHelp(name: string, group: Group): string {
  const width = Math.max(...Object.keys(group.commands).map((c) => c.length));
  const examples = Object.values(group.commands).flatMap((cmd) =>
    isGroup(cmd) ? Object.values(cmd.commands).flatMap((c) => (isGroup(c) ? [] : c.examples.slice(0, 1))) : cmd.examples.slice(0, 1),
  );
  return [
    group.summary,
    "",
    `Usage: dbaas ${name} <command> [options]`,
    "",
    "Commands:",
    ...Object.entries(group.commands).map(([c, cmd]) => `  ${c.padEnd(width)}   ${cmd.summary}`),
    "",
    "Examples:",
    ...examples.map((e) => `  $ ${e}`),
    "",
    `Run 'dbaas ${name} <command> --help' for a command's options and more examples.`,
    "",
  ].join("\n");
}
