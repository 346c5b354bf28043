/**
 * Two checks of `npm run check` fail when what they guard drifted: the lockfile against the package.json
 * files (scripts/check-lockfile.sh, `check:lockfile`) and the Go and Python clients' generated types against
 * the gateway's OpenAPI document (sdks/scripts/generate-types.ts --check, in `check:sdk`). Each runs on a copy
 * in a temporary directory with one deliberate drift; the repository's own files are only read.
 * (`check:sdk`'s other half, sdks/node/scripts/generate.ts --check, compiles the Node client: ~1 min here, so
 * it is not run by a test.)
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const temps: string[] = [];

afterEach(() => {
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "dbaas-drift-"));
  temps.push(dir);
  return dir;
}

/** Copies the repository's `path` (relative) to the same place under `into`. */
function copy(into: string, path: string): void {
  mkdirSync(dirname(join(into, path)), { recursive: true });
  copyFileSync(join(ROOT, path), join(into, path));
}

/** The workspaces' directories with a package.json, as npm expands the root's patterns. */
function workspaces(): string[] {
  const patterns: string[] = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).workspaces;
  return patterns
    .flatMap((p) => (p.endsWith("/*") ? readdirSync(join(ROOT, p.slice(0, -2))).map((d) => `${p.slice(0, -2)}/${d}`) : [p]))
    .filter((d) => existsSync(join(ROOT, d, "package.json")));
}

describe("scripts/check-lockfile.sh", () => {
  it("fails on a lockfile that no longer matches a workspace's package.json, saying what to run and showing the drift", () => {
    const copyRoot = tempDir();
    for (const path of ["package.json", "package-lock.json", "scripts/check-lockfile.sh"]) copy(copyRoot, path);
    for (const dir of workspaces()) copy(copyRoot, `${dir}/package.json`);
    // The drift: a dependency dropped from one manifest, the lockfile left as it was.
    const manifest = join(copyRoot, "test/package.json");
    const pkg = JSON.parse(readFileSync(manifest, "utf8"));
    expect(pkg.dependencies.pg).toBeDefined();
    delete pkg.dependencies.pg;
    writeFileSync(manifest, `${JSON.stringify(pkg, null, 2)}\n`);

    const run = spawnSync("bash", [join(copyRoot, "scripts/check-lockfile.sh")], { encoding: "utf8", timeout: 120_000 });
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toContain("package-lock.json is not in sync with the package.json files");
    expect(run.stderr).toContain("run 'npm install' and commit package-lock.json");
    // The diff names the dropped dependency, so the failure is the drift, not the copy.
    expect(run.stderr).toMatch(/^-\s+"pg": "/m);
  }, 150_000);
});

describe("sdks/scripts/generate-types.ts --check", () => {
  it("fails when a committed generated file differs from what the OpenAPI document gives, naming it and the command", () => {
    const copyRoot = tempDir();
    for (const path of ["sdks/scripts/generate-types.ts", "sdks/go/types_gen.go", "sdks/python/dbaas/models.py"]) copy(copyRoot, path);
    // The route table the script reads, and the modules it needs, are the repository's own (read only).
    symlinkSync(join(ROOT, "gateway"), join(copyRoot, "gateway"));
    symlinkSync(join(ROOT, "node_modules"), join(copyRoot, "node_modules"));
    // The drift: a field of a response type edited by hand in the Go client.
    const go = join(copyRoot, "sdks/go/types_gen.go");
    const text = readFileSync(go, "utf8");
    const field = /^\t(\w+)\s+string\s+`json:"name"`$/m;
    expect(text).toMatch(field);
    writeFileSync(go, text.replace(field, '\t$1 string `json:"name_by_hand"`'));

    const run = spawnSync(join(ROOT, "node_modules/.bin/tsx"), [join(copyRoot, "sdks/scripts/generate-types.ts"), "--check"], {
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(run.status, run.stderr).toBe(1);
    // Only the drifted file is named: the Python one, copied as committed, is in sync.
    expect(run.stderr.trim()).toBe("sdks/go/types_gen.go out of date: run `npm run generate:sdks` and commit the result.");
    // --check writes nothing.
    expect(readFileSync(go, "utf8")).toContain('json:"name_by_hand"');
  }, 150_000);
});
