#!/usr/bin/env node
/**
 * `dbaas`: the command-line tool on the Node client. Exit codes: 0 done,
 * 1 the API answered with an error (or a wait ended in failure), 2 usage
 * error, 3 the API could not be reached.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";
import { DbaasClient } from "../client.ts";
import { DbaasConnectionError, DbaasError, DbaasWaitError } from "../errors.ts";
import { DEFAULT_BASE_URL } from "../transport.ts";
import {
  CliError,
  type Command,
  type Context,
  commandHelp,
  GLOBAL_OPTIONS,
  type Group,
  groupHelp,
  isGroup,
  UsageError,
} from "./command.ts";
import { auth } from "./commands/auth.ts";
import { backups, restore } from "./commands/backups.ts";
import { billing } from "./commands/billing.ts";
import { databases } from "./commands/databases.ts";
import { apiKeys, members } from "./commands/organization.ts";
import { replicas } from "./commands/replicas.ts";
import { configPath, readConfig } from "./config.ts";

const TOP: Record<string, Group | Command> = { auth, databases, backups, restore, replicas, members, "api-keys": apiKeys, billing };

const EXIT = { ok: 0, api: 1, usage: 2, network: 3 } as const;

function topHelp(): string {
  const width = Math.max(...Object.keys(TOP).map((k) => k.length));
  return [
    "dbaas: manage PostgreSQL databases from the command line.",
    "",
    "Usage: dbaas <command> [<subcommand>] [options]",
    "",
    "Commands:",
    ...Object.entries(TOP).map(([name, x]) => `  ${name.padEnd(width)}   ${x.summary}`),
    "",
    "Credentials: 'dbaas auth login' keeps a token in ~/.config/dbaas/config.json (mode 0600;",
    "$XDG_CONFIG_HOME honoured); DBAAS_TOKEN (a token or an API key) takes precedence.",
    `API address: --url, else DBAAS_URL, else the config file, else ${DEFAULT_BASE_URL}.`,
    "Output: tables, or --output json. Exit codes: 0 ok, 1 API error, 2 usage error, 3 network error.",
    "",
    "Examples:",
    "  $ dbaas auth signup --email ada@example.com --name Ada --organization Acme",
    "  $ dbaas databases create --name orders --region fsn1 --tier micro --wait",
    "  $ dbaas databases list -o json",
    "",
    "Run 'dbaas <command> --help' for more.",
    "",
  ].join("\n");
}

/** Whether the words so far name a group, so the next word names one of its commands (or subgroups). */
function takesWord(words: string[]): boolean {
  if (words.length === 0) return true;
  let at: Group | Command | undefined = TOP[words[0]!];
  for (const w of words.slice(1)) at = at && isGroup(at) ? at.commands[w] : undefined;
  return at !== undefined && isGroup(at);
}

/** The command words (`databases create`) out of argv, skipping global options and their values. */
function splitWords(argv: string[]): { words: string[]; rest: string[] } {
  const words: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    if (!a.startsWith("-") && takesWord(words)) {
      words.push(a);
      continue;
    }
    rest.push(a);
    // A global option's value stays with it.
    if ((a === "--url" || a === "--output" || a === "-o") && i + 1 < argv.length) rest.push(argv[++i]!);
  }
  return { words, rest };
}

function resolve(words: string[]): { path: string; command?: Command; group?: Group } {
  const [first, ...more] = words;
  if (!first) return { path: "" };
  const top = TOP[first];
  if (!top) throw new UsageError(`unknown command '${first}'`);
  let at: Group | Command = top;
  let path = first;
  for (const w of more) {
    if (!isGroup(at)) break;
    const next: Group | Command | undefined = at.commands[w];
    if (!next) throw new UsageError(`unknown command '${path} ${w}'; run 'dbaas ${path} --help'`);
    at = next;
    path = `${path} ${w}`;
  }
  return isGroup(at) ? { path, group: at } : { path, command: at };
}

async function main(argv: string[]): Promise<number> {
  const { words, rest } = splitWords(argv);
  const { path, command, group } = resolve(words);
  const specs = { ...GLOBAL_OPTIONS, ...command?.options };
  const options = Object.fromEntries(
    Object.entries(specs).map(([name, o]) => [
      name,
      { type: o.type, ...(o.short && { short: o.short }), ...(o.multiple && { multiple: true }) },
    ]),
  ) as NonNullable<ParseArgsConfig["options"]>;
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (!command) {
    process.stdout.write(group ? groupHelp(path, group) : topHelp());
    return values.help ? EXIT.ok : EXIT.usage;
  }
  if (values.help) {
    process.stdout.write(commandHelp(path, command));
    return EXIT.ok;
  }
  const required = command.args ?? [];
  if (parsed.positionals.length < required.length) throw new UsageError(`missing <${required[parsed.positionals.length]}>`);
  if (!command.rest && parsed.positionals.length > required.length) {
    throw new UsageError(`unexpected argument '${parsed.positionals[required.length]}'`);
  }
  const output = values.output ?? "table";
  if (output !== "table" && output !== "json") throw new UsageError("--output must be table or json");

  const env = process.env;
  const cfgPath = configPath(env);
  const config = await readConfig(cfgPath);
  const baseUrl = (values.url as string | undefined) || env.DBAAS_URL || config.url || DEFAULT_BASE_URL;
  const token = env.DBAAS_TOKEN || config.token;
  const ctx: Context = {
    client: new DbaasClient({ baseUrl, token }),
    output,
    env,
    stdout: process.stdout,
    stderr: process.stderr,
    configPath: cfgPath,
    config,
  };
  await command.run(ctx, { values, positionals: parsed.positionals });
  return Number(process.exitCode ?? EXIT.ok);
}

/** Prints `err` for a person; the exit code says which kind of failure it was. */
function report(err: unknown, command: string | undefined): number {
  const e = process.stderr;
  if (err instanceof UsageError) {
    e.write(`Error: ${err.message}\nRun 'dbaas --help' (or '<command> --help') for usage.\n`);
    return EXIT.usage;
  }
  if (err instanceof DbaasError) {
    e.write(`Error: ${err.message} (${err.code}, HTTP ${err.status}${err.requestId ? `, request_id ${err.requestId}` : ""})\n`);
    for (const d of err.details) e.write(`  ${d.field}: ${d.message}\n`);
    if (err.status === 401 && command !== "auth") e.write("Log in with 'dbaas auth login', or set DBAAS_TOKEN to a token or an API key.\n");
    return EXIT.api;
  }
  if (err instanceof DbaasConnectionError) {
    e.write(`Error: ${err.message}\n`);
    return EXIT.network;
  }
  if (err instanceof DbaasWaitError || err instanceof CliError) {
    e.write(`Error: ${err.message}\n`);
    return EXIT.api;
  }
  e.write(`Error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  return EXIT.api;
}

const argv = process.argv.slice(2);
main(argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.exitCode = report(err, splitWords(argv).words[0]);
  },
);
