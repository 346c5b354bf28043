/**
 * Issue 15, the parts of the `dbaas` CLI that need no stack: `--help` on
 * every group and command, each with examples (walked from `dbaas --help`,
 * so a new command is covered without editing this file); usage errors exit
 * 2; the package has no runtime dependency; and the one-command install the
 * README names, `npm install -g ./sdks/node`, into a temporary prefix, whose
 * `dbaas` runs. The commands
 * against the real API are in test/sdks/node.test.ts.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const DBAAS = join(root, "node_modules/.bin/dbaas");

let home: string;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "dbaas-cli-help-"));
});

afterAll(async () => {
  if (home) await rm(home, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: Record<string, string> = {}, timeout = 60_000): Promise<Run> {
  const { DBAAS_TOKEN: _t, DBAAS_URL: _u, DBAAS_PASSWORD: _p, XDG_CONFIG_HOME: _x, ...inherited } = process.env;
  return new Promise((done) => {
    execFile(file, args, { cwd: root, env: { ...inherited, HOME: home, ...env }, timeout }, (err, stdout, stderr) => {
      done({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

const dbaas = (args: string[], env?: Record<string, string>) => run(DBAAS, args, env);

/** The names listed under "Commands:" in a help text. */
function commandsOf(help: string): string[] {
  const section = help.split("\nCommands:\n")[1]?.split("\n\n")[0] ?? "";
  return section.split("\n").map((line) => line.trim().split(/\s+/)[0]!);
}

describe("dbaas --help", () => {
  it("every group and command has help with a usage line and examples, exit 0", { timeout: 120_000 }, async () => {
    const top = await dbaas(["--help"]);
    expect(top).toMatchObject({ code: 0, stderr: "" });
    expect(top.stdout).toContain("Examples:\n  $ dbaas ");
    const groups = commandsOf(top.stdout);
    expect(groups).toEqual(
      expect.arrayContaining(["auth", "databases", "backups", "restore", "replicas", "members", "api-keys", "billing"]),
    );
    const seen: string[] = [];
    for (const group of groups) {
      const help = await dbaas([group, "--help"]);
      expect(help, group).toMatchObject({ code: 0, stderr: "" });
      expect(help.stdout, group).toMatch(new RegExp(`^Usage: dbaas ${group}`, "m"));
      expect(help.stdout, group).toMatch(new RegExp(`\nExamples:\n {2}\\$ .*dbaas ${group}`));
      const commands = help.stdout.includes("\nCommands:\n") ? commandsOf(help.stdout) : [];
      // `-h` as well as `--help`, alternately.
      // A command may be a group of its own (`databases roles`): its commands are walked too.
      const walk = async (words: string[], names: string[]): Promise<void> => {
        const checks = names.map(async (command, i) => {
          const path = [...words, command].join(" ");
          const sub = await dbaas([...words, command, i % 2 ? "-h" : "--help"]);
          expect(sub, path).toMatchObject({ code: 0, stderr: "" });
          expect(sub.stdout, path).toMatch(new RegExp(`^Usage: dbaas ${path}\\b`, "m"));
          expect(sub.stdout, path).toMatch(new RegExp(`\nExamples:\n {2}\\$ .*dbaas ${path}\\b`));
          seen.push(path);
          if (sub.stdout.includes("\nCommands:\n")) await walk([...words, command], commandsOf(sub.stdout));
        });
        await Promise.all(checks);
      };
      await walk([group], commands);
    }
    // The list, each found by the walk.
    const wanted = [
      "auth signup",
      "auth login",
      "auth logout",
      "auth token",
      ...["list", "create", "get", "rename", "start", "stop", "restart", "resize", "reset-password", "delete", "psql"].map(
        (c) => `databases ${c}`,
      ),
      ...[
        "roles list",
        "roles create",
        "roles delete",
        "roles reset-password",
        "dbs list",
        "dbs create",
        "dbs delete",
        "config get",
        "config set",
        "config reset",
        "extensions list",
        "extensions install",
        "extensions delete",
        "logs",
        "queries list",
        "queries reset",
      ].map((c) => `databases ${c}`),
      "backups list",
      "backups create",
      "billing usage",
      "billing invoices",
      "billing payment-methods",
    ];
    expect(seen).toEqual(expect.arrayContaining(wanted));
    expect(seen.some((c) => c.startsWith("replicas "))).toBe(true);
    expect(seen.some((c) => c.startsWith("members "))).toBe(true);
    expect(seen.some((c) => c.startsWith("api-keys "))).toBe(true);
  });

  it("a group without a command prints its help and exits 2; unknown words and options exit 2", async () => {
    const bare = await dbaas(["databases"]);
    expect(bare.code).toBe(2);
    expect(bare.stdout).toContain("Usage: dbaas databases <command>");
    expect((await dbaas([])).code).toBe(2);
    const unknown = await dbaas(["frobnicate"]);
    expect(unknown).toMatchObject({ code: 2, stdout: "" });
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");
    expect((await dbaas(["databases", "get", "db-1", "db-2"])).code).toBe(2);
    expect((await dbaas(["databases", "list", "--output", "yaml"])).code).toBe(2);
    const threshold = await dbaas(["billing", "create-alert", "--threshold", "lots"]);
    expect(threshold.code).toBe(2);
    expect(threshold.stderr).toContain("--threshold must be a number");
    const token = await dbaas(["auth", "token"]);
    expect(token.code).toBe(1);
    expect(token.stderr).toContain("not logged in");
  });
});

describe("the Node package", () => {
  it("has no runtime dependency: dist/ imports only Node's own modules and its own files", async () => {
    const pkg = JSON.parse(await readFile(join(root, "sdks/node/package.json"), "utf8"));
    expect(pkg.dependencies ?? {}).toEqual({});
    expect(pkg.peerDependencies ?? {}).toEqual({});
    const dist = join(root, "sdks/node/dist");
    const files = (await readdir(dist, { recursive: true })).filter((f) => f.endsWith(".js"));
    expect(files).toContain("cli/main.js");
    const foreign: string[] = [];
    const seen = new Set<string>();
    for (const file of files) {
      const source = await readFile(join(dist, file), "utf8");
      for (const [, spec] of source.matchAll(/(?:^|[\s;])(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gm)) {
        seen.add(spec!);
        if (!spec!.startsWith("node:") && !spec!.startsWith("./") && !spec!.startsWith("../")) foreign.push(`${file}: ${spec}`);
      }
      for (const [, spec] of source.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) {
        seen.add(spec!);
        if (!spec!.startsWith("node:") && !spec!.startsWith("./") && !spec!.startsWith("../")) foreign.push(`${file}: ${spec}`);
      }
    }
    // The scan reads the imports it judges: Node's own and the package's files among them.
    expect([...seen]).toEqual(expect.arrayContaining(["node:util", "node:crypto", "../client.js"]));
    expect(foreign).toEqual([]);
  });
});

describe("npm install -g ./sdks/node (the README's one command)", () => {
  for (const [how, flags] of [
    ["linked from the checkout", []],
    ["copied as packed (--install-links)", ["--install-links"]],
  ] as const) {
    it(`${how}: puts a working dbaas on the PATH, without a registry`, { timeout: 120_000 }, async () => {
      const prefix = await mkdtemp(join(tmpdir(), "dbaas-global-"));
      try {
        const install = await run(
          "npm",
          ["install", "-g", "--prefix", prefix, "--offline", "--no-audit", "--no-fund", ...flags, "./sdks/node"],
          { npm_config_cache: join(prefix, "cache") },
          110_000,
        );
        expect(install.code, install.stderr).toBe(0);
        const bin = join(prefix, "bin/dbaas");
        const help = await run(bin, ["--help"]);
        expect(help).toMatchObject({ code: 0, stderr: "" });
        expect(help.stdout).toContain("Usage: dbaas <command>");
        // A command runs (help alone loads every module: main.js imports the client statically). Exit code 3
        // when the API cannot be reached is node.test.ts's; here it would only add the client's 3.5 s of retries.
        const token = await run(bin, ["auth", "token", "-o", "json"], { DBAAS_TOKEN: "dbk_installed" });
        expect(token).toMatchObject({ code: 0, stderr: "" });
        expect(JSON.parse(token.stdout)).toEqual({ token: "dbk_installed", source: "DBAAS_TOKEN" });
        const pkg = JSON.parse(await readFile(join(prefix, "lib/node_modules/@dbaas/client/package.json"), "utf8"));
        expect(pkg.bin).toEqual({ dbaas: "dist/cli/main.js" });
      } finally {
        await rm(prefix, { recursive: true, force: true });
      }
    });
  }
});
