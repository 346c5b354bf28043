/**
 * The Go client (sdks/go): `go vet` and its unit tests (a local HTTP server
 * for retries, Retry-After, Idempotency-Key reuse, errors, paging; its structs'
 * fields against the OpenAPI document built from the route table), built with
 * Debian's Go 1.19 and no network, and its quickstart against the real stack:
 * sign up, create, wait for running, SELECT 1 through psql with the returned
 * connection string, list with an API key, a 422 as a *dbaas.Error, delete;
 * and the README's example, in a module of its own as the README sets one up.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument } from "../../gateway/src/routes/openapi.ts";
import { ROUTES } from "../../gateway/src/routes/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { startStack, type Stack } from "../support/stack.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const sdk = join(root, "sdks/go");
const run = promisify(execFile);
// The build cache in node_modules/.cache (ignored, kept between runs); no toolchain or module downloads.
const cache = join(root, "node_modules/.cache/dbaas-go");
const goEnv = {
  ...process.env,
  GOCACHE: join(cache, "build"),
  GOPATH: join(cache, "path"),
  GOFLAGS: "-mod=mod",
  GOTOOLCHAIN: "local",
  GOPROXY: "off",
  GOSUMDB: "off",
};

function go(args: string[], env: NodeJS.ProcessEnv = goEnv, timeout = 180_000) {
  return run("go", args, { cwd: sdk, env, timeout, maxBuffer: 16 * 1024 * 1024 });
}

// The stack starts while go vet and the unit tests (which need none) run; its metadata in the shared
// test server (TEST_DATABASE_URL), not an embedded PostgreSQL of its own to initdb.
let meta: TestDatabase | undefined;
let starting: Promise<Stack> | undefined;

beforeAll(async () => {
  starting = (async () => {
    meta = await createTestDatabase("e2e_sdk_go");
    return await startStack({ databaseUrl: meta.url, agents: "fsn1" });
  })();
  starting.catch(() => {}); // Reported by the tests that await it.
  try {
    await run("go", ["version"]);
  } catch {
    throw new Error("`go` is not installed: apt-get install golang-go (Go 1.19; .ci/run installs it)");
  }
});

afterAll(async () => {
  await (await starting?.catch(() => undefined))?.destroy();
  await meta?.drop();
}, 60_000);

describe("Go client", () => {
  it("passes go vet and its unit tests, its structs matching the OpenAPI document", async () => {
    await go(["vet", "./..."]);
    const dir = await mkdtemp(join(tmpdir(), "dbaas-go-"));
    try {
      const file = join(dir, "openapi.json");
      await writeFile(file, JSON.stringify(openApiDocument(ROUTES, "http://127.0.0.1:8080")));
      const { stdout } = await go(["test", "-count=1", "-v", "./..."], { ...goEnv, DBAAS_OPENAPI: file });
      expect(stdout).toMatch(/^ok\s+github\.com\/dbaas\/dbaas-go\s/m);
      expect(stdout).toMatch(/^--- PASS: TestTypesMatchTheOpenAPIDocument /m);
      // context.Context first, (T, error), iterators: every method of Operations and Iterators.
      expect(stdout).toMatch(/^--- PASS: TestEveryOperationIsIdiomatic /m);
      expect(stdout).not.toContain("--- SKIP");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 240_000);

  describe("quickstart against the real stack", () => {
    let stack: Stack;

    beforeAll(async () => {
      stack = await starting!;
    }, 240_000);

    it("signs up, creates, connects, lists, prints a typed 422 and deletes", async () => {
      const { stdout } = await go(["run", "./examples/quickstart"], { ...goEnv, DBAAS_URL: stack.baseUrl, DBAAS_TOKEN: "" });
      const id = /^created: (db-[a-z0-9]+) \(provisioning\)$/m.exec(stdout)?.[1];
      expect(id, stdout).toBeDefined();
      expect(stdout).toMatch(/^signed up: quickstart-\d+@example\.com \(organization org-[a-z0-9]+, plan free\)$/m);
      expect(stdout).toMatch(new RegExp(`^running: ${id} at ${id}\\.db\\.localhost:\\d+$`, "m"));
      expect(stdout).toMatch(/^psql: SELECT 1 -> 1$/m);
      expect(stdout).toMatch(new RegExp(`^listed with API key dbk_\\S*…: ${id} orders micro running$`, "m"));
      expect(stdout).toMatch(/^rate limit: \d+ of [1-9]\d* left until \d{4}-\d\d-\d\dT/m);
      expect(stdout).toMatch(/^error: 422 validation_error: .+ \(request req_\S+\)$/m);
      expect(stdout).toMatch(/^ {2}name: \S/m);
      expect(stdout).toContain(`deleted: ${id}\n`);
      expect(stdout).toMatch(/^databases left: 0$/m);
    }, 240_000);

    it("runs the README's example as written, in a module of its own", async () => {
      const readme = await readFile(join(sdk, "README.md"), "utf8");
      const example = /```go\n([\s\S]*?)```/.exec(readme)?.[1];
      expect(example).toContain("package main");
      const dir = await mkdtemp(join(tmpdir(), "dbaas-go-readme-"));
      try {
        // The module set up as the README says: a require of the client, replaced by this checkout's copy.
        await writeFile(join(dir, "go.mod"), "module readme\n\ngo 1.19\n");
        await run("go", ["mod", "edit", "-require=github.com/dbaas/dbaas-go@v0.0.0", `-replace=github.com/dbaas/dbaas-go=${sdk}`], {
          cwd: dir,
          env: goEnv,
        });
        await writeFile(join(dir, "main.go"), example!.replaceAll("http://127.0.0.1:8080", stack.baseUrl));
        const { stdout } = await run("go", ["run", "."], { cwd: dir, env: { ...goEnv, DBAAS_TOKEN: "" }, timeout: 180_000 });
        expect(stdout).toMatch(/^postgresql:\/\/dbadmin:.+@db-[a-z0-9]+\.db\.localhost:\d+\/defaultdb\?sslmode=require$/m);
        expect(stdout).toMatch(/^db-[a-z0-9]+ running$/m);
        expect(stdout).toMatch(/^db-[a-z0-9]+ orders running$/m);
        expect(stdout).toMatch(/^422 validation_error .+ \[\{name .+\}\] req_\S+$/m);
        expect(stdout).toMatch(/^\{Limit:\d+ Remaining:\d+ Reset:\d{4}-/m);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }, 200_000);
  });
});
