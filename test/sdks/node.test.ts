/**
 * Issue 15 on the real stack: the Node client's example program, the `dbaas`
 * CLI as installed (the workspace's bin link, running the committed dist/),
 * its exit codes, and through tmux (a real terminal) the e-mail and password
 * prompts (the password without echo), the --wait spinner and an interactive
 * `databases psql` whose Ctrl-C cancels the query without ending dbaas.
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { freePortBlock, type Stack, startStack } from "../support/stack.ts";

const root = resolve(import.meta.dirname, "../..");
const DBAAS = join(root, "node_modules/.bin/dbaas");
const PASSWORD = "a-long-password";
const ESC = String.fromCharCode(27);

let stack: Stack;
let meta: TestDatabase;
let home: string;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_sdk_node");
  // The seed backup of a replica waits for the backup scheduler's next pass (30 s by default).
  stack = await startStack({ databaseUrl: meta.url, agents: "fsn1,nbg1,hel1", env: { BACKUP_SCHEDULE_INTERVAL_MS: "1000" } });
  home = await mkdtemp(join(tmpdir(), "dbaas-cli-home-"));
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** The environment of a user of this stack: nothing inherited that names another API or credential. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { DBAAS_TOKEN: _t, DBAAS_URL: _u, DBAAS_PASSWORD: _p, XDG_CONFIG_HOME: _x, ...env } = process.env;
  return { ...env, HOME: home, DBAAS_URL: stack.baseUrl, ...extra };
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function dbaas(args: string[], extra: Record<string, string> = {}): Promise<Run> {
  return new Promise((done) => {
    execFile(DBAAS, args, { env: userEnv(extra), timeout: 180_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

const email = (what: string) => `${what}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;

describe("the Node client's example program", () => {
  it("signs up, creates, waits, connects, lists, shows a typed 422 and deletes", { timeout: 180_000 }, async () => {
    const out = execFileSync(process.execPath, [join(root, "sdks/node/examples/quickstart.mjs")], {
      env: userEnv(),
      encoding: "utf8",
      timeout: 170_000,
    });
    expect(out).toMatch(/^signed up: org-/m);
    const id = /^created: (db-[a-z0-9]+) \(provisioning\)$/m.exec(out)?.[1];
    expect(id).toBeDefined();
    expect(out).toContain(`running: ${id}.`);
    expect(out).toContain("SELECT 1 -> 1");
    expect(out).toMatch(new RegExp(`^listed: ${id} orders running$`, "m"));
    expect(out).toMatch(/^rate limit: \d+\/\d+ left$/m);
    expect(out).toMatch(/^error: 422 validation_error: .+ \(request req_[^)]+\)$/m);
    expect(out).toMatch(/^ {2}name: /m);
    expect(out).toContain(`deleted: ${id}`);
  });
});

describe("the Node client's README", () => {
  it("runs its example as written", { timeout: 180_000 }, async () => {
    const readme = await readFile(join(root, "sdks/node/README.md"), "utf8");
    const example = /```js\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toContain('from "@dbaas/client"');
    // From the package's folder, as a user's module would import it once installed.
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", example!.replaceAll("http://127.0.0.1:8080", stack.baseUrl)], {
      cwd: join(root, "sdks/node"),
      env: userEnv(),
      encoding: "utf8",
      timeout: 170_000,
    });
    expect(out).toMatch(/^postgresql:\/\/dbadmin:.+@db-[a-z0-9]+\.db\.localhost:\d+\/defaultdb\?sslmode=require$/m);
    expect(out).toMatch(/^db-[a-z0-9]+ orders running$/m);
    expect(out).toMatch(/^1 1$/m);
    expect(out).toMatch(/^422 validation_error .+ \[ \{ field: 'name', message: .+ \} \] req_\S+$/m);
    expect(out).toMatch(/^\{ limit: \d+, remaining: \d+, reset: \d+ \}$/m);
  });
});

describe("the dbaas CLI", () => {
  it("signup → create --wait → list → get → psql → delete, credentials in a 0600 config file", { timeout: 180_000 }, async () => {
    const signup = await dbaas(["auth", "signup", "--email", email("cli"), "--name", "Ada", "--organization", "Acme"], {
      DBAAS_PASSWORD: PASSWORD,
    });
    expect(signup).toMatchObject({ code: 0, stderr: "" });
    expect(signup.stdout).toMatch(/^Signed up as .+ in Acme \(org-/);
    const configFile = join(home, ".config/dbaas/config.json");
    expect((await stat(configFile)).mode & 0o777).toBe(0o600);
    const config = JSON.parse(await readFile(configFile, "utf8"));
    expect(config).toMatchObject({ url: stack.baseUrl, token: expect.stringMatching(/^dbs_/) });
    expect((await dbaas(["auth", "token"])).stdout.trim()).toBe(config.token);

    const created = await dbaas([
      "databases",
      "create",
      "--name",
      "cli-orders",
      "--region",
      "nbg1",
      "--tier",
      "micro",
      "--wait",
      "-o",
      "json",
    ]);
    expect(created.code).toBe(0);
    const db = JSON.parse(created.stdout);
    expect(db).toMatchObject({ name: "cli-orders", region: "nbg1", status: "running", password: expect.any(String) });
    // Not a terminal: plain progress lines on stderr, no spinner.
    expect(created.stderr).toContain(`${db.id} is running\n`);
    expect(created.stderr).not.toContain("\r");
    expect(created.stderr).not.toContain(ESC);

    const list = await dbaas(["databases", "list", "--output", "json"]);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ id: db.id, status: "running" })]);
    const table = await dbaas(["databases", "list"]);
    expect(table.stdout.split("\n")[0]).toMatch(/^ID\s+NAME\s+STATUS\s+REGION/);
    expect(table.stdout).toMatch(new RegExp(`^${db.id}\\s+cli-orders\\s+running\\s+nbg1`, "m"));

    const got = await dbaas(["databases", "get", db.id]);
    expect(got.code).toBe(0);
    expect(got.stdout).toMatch(/^status:\s+running$/m);
    expect(got.stdout).toMatch(new RegExp(`^host:\\s+${db.host.replace(/\./g, "\\.")}$`, "m"));

    const psql = await dbaas(["databases", "psql", db.id, "--", "-XAtc", "SELECT current_user || ' ' || 1"], { PGPASSWORD: db.password });
    expect(psql).toMatchObject({ code: 0, stdout: `${db.username} 1\n` });
    const wrong = await dbaas(["databases", "psql", db.id, "--password", "not-it", "--", "-XAtc", "SELECT 1"]);
    expect(wrong.code).toBe(2); // psql's own exit status: the connection failed
    expect(wrong.stderr).toContain("password authentication failed");

    const renamed = await dbaas(["databases", "rename", db.id, "cli-orders-2", "-o", "json"]);
    expect(JSON.parse(renamed.stdout)).toMatchObject({ id: db.id, name: "cli-orders-2" });

    const deleted = await dbaas(["databases", "delete", db.id]);
    expect(deleted).toMatchObject({ code: 0, stdout: `Deleted ${db.id}.\n` });
    expect(JSON.parse((await dbaas(["databases", "list", "-o", "json"])).stdout)).toEqual([]);
  });

  it("API keys work as DBAAS_TOKEN; logout forgets the token and a 401 says how to log in", { timeout: 60_000 }, async () => {
    const login = await dbaas(["auth", "login", "--email", email("keys")], { DBAAS_PASSWORD: PASSWORD });
    expect(login.code).toBe(1); // no such user
    expect(login.stderr).toMatch(/^Error: .+ \(\w+, HTTP 401, request_id req_\w+\)\n$/);

    const address = email("keys");
    expect(
      (await dbaas(["auth", "signup", "--email", address, "--name", "K", "--organization", "Keys"], { DBAAS_PASSWORD: PASSWORD })).code,
    ).toBe(0);
    expect((await dbaas(["auth", "login", "--email", address], { DBAAS_PASSWORD: PASSWORD })).stdout).toMatch(/^Logged in as /);
    const key = JSON.parse((await dbaas(["api-keys", "create", "--name", "ci", "--scope", "databases:read", "-o", "json"])).stdout);
    expect(key.secret).toMatch(/^dbk_/);
    expect((await dbaas(["auth", "logout"])).stdout).toBe("Logged out.\n");

    const anonymous = await dbaas(["databases", "list"]);
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toContain("HTTP 401");
    expect(anonymous.stderr).toContain("dbaas auth login");
    const withKey = await dbaas(["databases", "list", "-o", "json"], { DBAAS_TOKEN: key.secret });
    expect(withKey).toMatchObject({ code: 0, stdout: "[]\n" });
    const forbidden = await dbaas(["databases", "create", "--name", "nope", "--region", "fsn1", "--tier", "micro"], {
      DBAAS_TOKEN: key.secret,
    });
    expect(forbidden.code).toBe(1);
    expect(forbidden.stderr).toContain("HTTP 403");
  });

  it("exit codes: 2 for a usage error, 1 for an API error (code, message, request_id), 3 when the API is unreachable", async () => {
    const address = email("codes");
    await dbaas(["auth", "signup", "--email", address, "--name", "C", "--organization", "Codes"], { DBAAS_PASSWORD: PASSWORD });

    const missing = await dbaas(["databases", "create", "--name", "x"]);
    expect(missing).toMatchObject({ code: 2, stdout: "" });
    expect(missing.stderr).toContain("--region is required");
    expect((await dbaas(["databases", "get"])).code).toBe(2);
    expect((await dbaas(["databases", "frobnicate"])).code).toBe(2);
    expect((await dbaas(["databases", "list", "--bogus"])).code).toBe(2);

    const invalid = await dbaas(["databases", "create", "--name", "x", "--region", "fsn1", "--tier", "micro"]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^Error: .+ \(validation_error, HTTP 422, request_id req_[^)]+\)\n {2}name: /);

    const port = await freePortBlock(1);
    const unreachable = await dbaas(["databases", "list", "--url", `http://127.0.0.1:${port}`]);
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toContain(`cannot reach http://127.0.0.1:${port}`);

    const help = await dbaas(["databases", "resize", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: dbaas databases resize <database-id> --tier TIER");
    expect(help.stdout).toContain("Examples:");
  });
});

describe("dbaas replicas", () => {
  it("create --wait → list → get → promote --wait, and delete; refusals exit 1, usage errors 2", { timeout: 300_000 }, async () => {
    // An organization of its own: the other tests log in and out of the shared config file.
    const env = { XDG_CONFIG_HOME: join(home, "replicas") };
    const run = (args: string[]) => dbaas(args, env);
    const signup = ["auth", "signup", "--email", email("replicas"), "--name", "R", "--organization", "Replicas"];
    expect((await dbaas(signup, { ...env, DBAAS_PASSWORD: PASSWORD })).code).toBe(0);
    const unpaid = await run([
      "databases",
      "create",
      "--name",
      "rep-primary",
      "--region",
      "fsn1",
      "--tier",
      "micro",
      "--wait",
      "-o",
      "json",
    ]);
    expect(unpaid.code).toBe(0);
    const db = JSON.parse(unpaid.stdout);
    const refused = await run(["replicas", "create", db.id, "--name", "reports"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("(payment_required, HTTP 402");
    expect((await run(["billing", "add-payment-method", "--token", "tok_visa"])).code).toBe(0);

    const created = await run(["replicas", "create", db.id, "--name", "reports", "--wait", "-o", "json"]);
    expect(created.code, created.stderr).toBe(0);
    const replica = JSON.parse(created.stdout);
    expect(replica).toMatchObject({ id: expect.stringMatching(/^rep-/), name: "reports", database_id: db.id, status: "running" });
    expect(replica).not.toHaveProperty("password");
    expect(created.stderr).toContain(`${replica.id} is running\n`);

    const table = await run(["replicas", "list", db.id]);
    expect(table.stdout.split("\n")[0]).toMatch(/^ID\s+NAME\s+STATUS\s+REGION\s+TIER\s+LAG_BYTES/);
    expect(table.stdout).toMatch(new RegExp(`^${replica.id}\\s+reports\\s+running\\s+fsn1\\s+micro\\s+\\d+`, "m"));
    const got = await run(["replicas", "get", db.id, replica.id]);
    expect(got.stdout).toMatch(/^connection_string:\s+postgresql:\/\/dbadmin:\*+@/m);
    expect((await run(["replicas", "get", db.id])).code).toBe(2);
    const clash = await run(["replicas", "create", db.id, "--name", "reports"]);
    expect(clash.code).toBe(1);
    expect(clash.stderr).toContain("(resource_conflict, HTTP 409");

    const promoted = await run(["replicas", "promote", db.id, replica.id, "--wait", "-o", "json"]);
    expect(promoted.code, promoted.stderr).toBe(0);
    expect(JSON.parse(promoted.stdout)).toMatchObject({ id: expect.stringMatching(/^db-/), name: "reports", status: "running" });
    expect(JSON.parse((await run(["replicas", "list", db.id, "-o", "json"])).stdout)).toEqual([]);

    const spare = JSON.parse((await run(["replicas", "create", db.id, "--name", "spare", "-o", "json"])).stdout);
    expect(await run(["replicas", "delete", db.id, spare.id])).toMatchObject({ code: 0, stdout: `Deleted ${spare.id}.\n` });
    const gone = await run(["replicas", "get", db.id, spare.id]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("HTTP 404");
  });
});

describe("the dbaas CLI in a terminal (tmux)", () => {
  const socket = `dbaas-sdk-node-${process.pid}`;
  const tmux = (...args: string[]) =>
    execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const pane = () => tmux("capture-pane", "-p", "-t", "cli");

  async function until(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`tmux: no ${what} in:\n${pane()}`);
      await sleep(100);
    }
  }

  /**
   * Runs `args` in a fresh tmux session (a real terminal), once `before` (e.g. a pipe-pane) is set up;
   * the pane stays after it exits, showing its exit code.
   */
  function inTerminal(args: string[], before: () => void = () => {}): void {
    const env = Object.entries({ HOME: home, DBAAS_URL: stack.baseUrl }).map(([k, v]) => `${k}='${v}'`);
    const quoted = args.map((a) => `'${a}'`).join(" ");
    const command = `read -r _; env -u DBAAS_TOKEN -u DBAAS_PASSWORD ${env.join(" ")} ${DBAAS} ${quoted}; echo EXIT=$?; sleep 600`;
    try {
      tmux("kill-session", "-t", "cli");
    } catch {
      // None left by an earlier test.
    }
    tmux("new-session", "-d", "-s", "cli", "-x", "160", "-y", "40", command);
    before();
    tmux("send-keys", "-t", "cli", "Enter");
  }

  afterAll(() => {
    try {
      tmux("kill-server");
    } catch {
      // Already gone.
    }
  });

  it("auth login asks for the e-mail address, then the password without echoing it", { timeout: 60_000 }, async () => {
    const address = email("tty");
    await dbaas(["auth", "signup", "--email", address, "--name", "T", "--organization", "Tty"], { DBAAS_PASSWORD: PASSWORD });
    await dbaas(["auth", "logout"]);
    inTerminal(["auth", "login"]);
    // capture-pane drops trailing blanks: the prompts are "E-mail: " and "Password: ".
    await until("e-mail prompt", () => pane().includes("E-mail:"));
    tmux("send-keys", "-t", "cli", "-l", address);
    tmux("send-keys", "-t", "cli", "Enter");
    await until("password prompt", () => pane().includes("Password:"));
    tmux("send-keys", "-t", "cli", "-l", PASSWORD);
    tmux("send-keys", "-t", "cli", "Enter");
    await until("exit", () => pane().includes("EXIT="));
    const screen = pane();
    expect(screen).toContain(`Logged in as ${address}`);
    expect(screen).toContain("EXIT=0");
    expect(screen).not.toContain(PASSWORD);
    tmux("kill-session", "-t", "cli");
  });

  it("--wait shows a spinner on a terminal and ends with a tick", { timeout: 120_000 }, async () => {
    const log = join(home, "pane.log");
    inTerminal(["databases", "create", "--name", "tty-db", "--region", "hel1", "--tier", "micro", "--wait"], () =>
      tmux("pipe-pane", "-t", "cli", "-o", `cat >> ${log}`),
    );
    await until("exit", () => pane().includes("EXIT="), 90_000);
    const screen = pane();
    expect(screen).toContain("EXIT=0");
    expect(screen).toMatch(/✔ db-[a-z0-9]+ is running/);
    const raw = await readFile(log, "utf8");
    // Redrawn in place: carriage return, erase line, a braille frame.
    expect(raw).toMatch(new RegExp(`\r${ESC}\\[K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] db-[a-z0-9]+: `));
    tmux("kill-session", "-t", "cli");
  });

  it("databases psql is an interactive psql: Ctrl-C cancels its query, not dbaas; \\q exits 0", { timeout: 120_000 }, async () => {
    const [db] = JSON.parse((await dbaas(["databases", "list", "-o", "json"])).stdout) as { id: string; name: string }[];
    expect(db).toMatchObject({ name: "tty-db" });
    const { password } = JSON.parse((await dbaas(["databases", "reset-password", db!.id, "-o", "json"])).stdout);
    inTerminal(["databases", "psql", db!.id, "--password", password]);
    await until("psql prompt", () => /^defaultdb=> ?$/m.test(pane()));
    const type = (line: string) => {
      // A trailing ";" would end the tmux command: escaped, it is typed.
      tmux("send-keys", "-t", "cli", "-l", line.replace(/;$/, "\\;"));
      tmux("send-keys", "-t", "cli", "Enter");
    };
    type("SELECT 40 + 2 AS answer;");
    await until("answer", () => /^\s+42$/m.test(pane()));
    type("SELECT pg_sleep(600);");
    // Ctrl-C once the server runs it (seen from a second session), so it is the query that gets cancelled.
    const running = ["databases", "psql", db!.id, "--password", password, "--", "-XAtc"];
    const sleeping = `SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600);' AND state = 'active'`;
    await until("running query", () => execFileSync(DBAAS, [...running, sleeping], { env: userEnv(), encoding: "utf8" }).trim() === "1");
    tmux("send-keys", "-t", "cli", "C-c");
    await until("cancellation", () => pane().includes("canceling statement due to user request"));
    type("\\q");
    await until("exit", () => pane().includes("EXIT="));
    expect(pane()).toContain("EXIT=0");
    tmux("kill-session", "-t", "cli");
  });
});
