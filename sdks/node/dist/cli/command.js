import { record, table } from "./output.js";
/** Wrong invocation: exit code 2, with a pointer to --help. */
export class UsageError extends Error {
}
/** A failure found by the CLI itself (not logged in, psql missing, …): exit code 1. */
export class CliError extends Error {
}
export const isGroup = (x) => "commands" in x;
export const WAIT = { type: "boolean", description: "Wait until the change is done, showing progress." };
/** A required option's value, or a usage error naming it. */
export function need(args, name) {
    const v = args.values[name];
    if (typeof v !== "string" || v === "")
        throw new UsageError(`--${name} is required`);
    return v;
}
export const optional = (args, name) => {
    const v = args.values[name];
    return typeof v === "string" ? v : undefined;
};
/** Prints `data` as JSON with --output json, otherwise as a table of `columns` (a list) or `key: value` lines. */
export function print(ctx, data, columns) {
    if (ctx.output === "json")
        ctx.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
    else if (Array.isArray(data))
        ctx.stdout.write(columns ? table(data, columns) : data.map((d) => record(d)).join("\n"));
    else
        ctx.stdout.write(record(data));
}
/** A human sentence (suppressed with --output json, where only the data is printed). */
export function say(ctx, line) {
    if (ctx.output !== "json")
        ctx.stdout.write(`${line}\n`);
}
/** What a command that answers no data did: `line` for a person, the object `json` with --output json. */
export function outcome(ctx, json, line) {
    if (ctx.output === "json")
        print(ctx, json);
    else
        say(ctx, line);
}
function optionLines(options) {
    const rows = Object.entries(options).map(([name, o]) => {
        const flag = `${o.short ? `-${o.short}, ` : "    "}--${name}${o.type === "string" ? ` ${o.value ?? "VALUE"}` : ""}`;
        return [flag, o.description + (o.multiple ? " (repeatable)" : "")];
    });
    const width = Math.max(...rows.map(([f]) => f.length));
    return rows.map(([f, d]) => `  ${f.padEnd(width)}   ${d}`);
}
export const GLOBAL_OPTIONS = {
    url: { type: "string", value: "URL", description: "API address (default: $DBAAS_URL, the config file, http://127.0.0.1:8080)" },
    output: { type: "string", short: "o", value: "FORMAT", description: "table (default) or json" },
    help: { type: "boolean", short: "h", description: "Show help" },
};
export function commandHelp(path, cmd) {
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
export function groupHelp(name, group) {
    const width = Math.max(...Object.keys(group.commands).map((c) => c.length));
    const examples = Object.values(group.commands).flatMap((cmd) => isGroup(cmd) ? Object.values(cmd.commands).flatMap((c) => (isGroup(c) ? [] : c.examples.slice(0, 1))) : cmd.examples.slice(0, 1));
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
