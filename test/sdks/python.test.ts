/**
 * The Python client (sdks/python): its unit tests (a local HTTP server for
 * retries, Retry-After, Idempotency-Key reuse and errors), a pip install into
 * a fresh virtual environment without an index, and its quickstart against
 * the real stack: sign up, create, wait for running, SELECT 1 through psql
 * with the returned connection string, list with an API key, a 422 as a typed
 * error, delete.
 */
import { execFile } from "node:child_process";
import { cp, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const sdk = join(root, "sdks/python");
const run = promisify(execFile);

// The stack starts while the tests that need none (unit tests, pip install) run; its metadata in the
// shared test server (TEST_DATABASE_URL), not an embedded PostgreSQL of its own to initdb.
let meta: TestDatabase | undefined;
let starting: Promise<Stack> | undefined;

beforeAll(() => {
  starting = (async () => {
    meta = await createTestDatabase("e2e_sdk_python");
    return await startStack({ databaseUrl: meta.url, agents: "fsn1" });
  })();
  starting.catch(() => {}); // Reported by the tests that await it.
});

afterAll(async () => {
  await (await starting?.catch(() => undefined))?.destroy();
  await meta?.drop();
}, 60_000);

describe("Python client", () => {
  it("passes its unit tests", async () => {
    // unittest reports on stderr; a failing test exits non-zero and rejects.
    const { stderr } = await run("python3", ["-m", "unittest", "discover", "-s", "sdks/python/tests"], { cwd: root });
    expect(stderr).toMatch(/Ran [1-9]\d* tests/);
    expect(stderr.trimEnd()).toMatch(/\nOK$/);
  });

  it("installs with pip into a fresh virtual environment without reaching an index", async () => {
    const dir = await mkdtemp(join(tmpdir(), "dbaas-py-"));
    try {
      // A copy: pip builds in the source tree.
      await cp(sdk, join(dir, "src"), { recursive: true, filter: (p) => !p.includes("__pycache__") });
      await run("python3", ["-m", "venv", join(dir, "venv")]);
      const python = join(dir, "venv/bin/python");
      await run(python, ["-m", "pip", "install", "--no-index", "--quiet", join(dir, "src")], { timeout: 60_000 });
      await rm(join(dir, "src"), { recursive: true });
      const { stdout } = await run(python, ["-c", "import dbaas, json; print(json.dumps([dbaas.__file__, len(dbaas.OPERATIONS)]))"], {
        cwd: dir,
      });
      const [file, operations] = JSON.parse(stdout) as [string, number];
      expect(file).toContain(join(dir, "venv"));
      expect(operations).toBeGreaterThan(40);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);

  describe("quickstart against the real stack", () => {
    let stack: Stack;

    beforeAll(async () => {
      stack = await starting!;
    }, 240_000);

    it("signs up, creates, connects, lists, prints a typed 422 and deletes", async () => {
      const { stdout } = await run("python3", ["sdks/python/examples/quickstart.py"], {
        cwd: root,
        env: { ...process.env, DBAAS_URL: stack.baseUrl, DBAAS_TOKEN: "" },
        timeout: 180_000,
      });
      const id = /^created: (db-[a-z0-9]+) \(provisioning\)$/m.exec(stdout)?.[1];
      expect(id, stdout).toBeDefined();
      expect(stdout).toMatch(/^signed up: quickstart-[0-9a-f]+@example\.com in org-/m);
      expect(stdout).toContain(`running: ${id}.db.localhost:`);
      expect(stdout).toMatch(/^SELECT 1 -> 1$/m);
      expect(stdout).toMatch(new RegExp(`^listed with API key dbk_\\S*…: ${id}$`, "m"));
      expect(stdout).toMatch(/^rate limit: \d+\/\d+ left$/m);
      expect(stdout).toMatch(/^error: 422 validation_error: .+ \(request req_\S+\)$/m);
      expect(stdout).toMatch(/^ {2}name: /m);
      expect(stdout).toContain(`deleted: ${id}`);

      expect(stdout).toMatch(/^databases left: 0$/m);
    }, 200_000);

    it("runs the README's example as written", async () => {
      const readme = await readFile(join(sdk, "README.md"), "utf8");
      const example = /```python\n([\s\S]*?)```/.exec(readme)?.[1];
      expect(example).toBeDefined();
      const { stdout } = await run("python3", ["-c", example!.replaceAll("http://127.0.0.1:8080", stack.baseUrl)], {
        cwd: sdk,
        timeout: 180_000,
      });
      expect(stdout).toMatch(/^postgresql:\/\/dbadmin:.+@db-[a-z0-9]+\.db\.localhost:\d+\/defaultdb\?sslmode=require$/m);
      expect(stdout).toMatch(/^db-[a-z0-9]+ orders running$/m);
      expect(stdout).toMatch(/^422 validation_error .+ \[\{'field': 'name', 'message': .+\}\] req_\S+$/m);
      expect(stdout).toMatch(/^RateLimit\(limit=\d+, remaining=\d+, reset=\d+\)$/m);
    }, 200_000);
  });
});
