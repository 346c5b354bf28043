import { execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXAMPLE_SECRETS, requireSecret } from "../src/index.ts";

// Production refuses the secrets this repository ships as examples, and short
// ones; compose takes its secrets from a generated, git-ignored .env.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const run = promisify(execFile);

/** Secret-looking settings: what production must never take from an example. */
const SECRET_NAME = /^[A-Z0-9_]*(SECRET|PASSWORD|_KEY)[A-Z0-9_]*$/;

/** Files shipped with examples of settings: compose, k8s, .env.example, READMEs. */
async function shippedFiles(): Promise<string[]> {
  const files = ["docker-compose.yml", ".env.example", "README.md", "gateway/README.md", "deploy/k8s/secrets.env.example"];
  for (const f of await readdir(path.join(root, "deploy/k8s"))) if (/\.(ya?ml|md)$/.test(f)) files.push(`deploy/k8s/${f}`);
  for (const s of await readdir(path.join(root, "services"))) files.push(`services/${s}/README.md`);
  return files;
}

/** `NAME=value`, `NAME: value` and `${NAME:-value}` of secret-named settings, with the value as written. */
function examples(text: string): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (const m of text.matchAll(/\$\{([A-Z0-9_]+):-([^}]*)\}/g)) out.push({ name: m[1]!, value: m[2]! });
  for (const m of text.matchAll(/^\s*([A-Z][A-Z0-9_]+)\s*[=:]\s*["']?([^"'\s#`]+)["']?/gm)) out.push({ name: m[1]!, value: m[2]! });
  for (const m of text.matchAll(/`([A-Z][A-Z0-9_]+)=([^`\s]+)`/g)) out.push({ name: m[1]!, value: m[2]! });
  return out.filter((e) => SECRET_NAME.test(e.name) && e.value !== "" && !e.value.startsWith("$") && !e.value.startsWith("{"));
}

describe("secrets in production", () => {
  it("refuses every secret example shipped in the repository", async () => {
    const found: string[] = [];
    for (const file of await shippedFiles()) {
      const text = await readFile(path.join(root, file), "utf8").catch(() => "");
      for (const { name, value } of examples(text)) {
        found.push(`${file}: ${name}`);
        expect(() => requireSecret({ NODE_ENV: "production", [name]: value }, name), `${file}: ${name}=${value}`).toThrow(name);
      }
    }
    // The scan sees the examples it is meant to (a change of format would otherwise pass vacuously).
    expect(found).toEqual(
      expect.arrayContaining([
        ".env.example: INTERNAL_AUTH_SECRET",
        ".env.example: BACKUP_ENCRYPTION_KEY",
        "deploy/k8s/secrets.env.example: AGENT_REPLICATION_SECRET",
        "deploy/k8s/secrets.env.example: STRIPE_SECRET_KEY",
      ]),
    );
    // The long ones are refused as examples, not only for their length.
    for (const value of EXAMPLE_SECRETS) {
      expect(() => requireSecret({ NODE_ENV: "production", S: value }, "S")).toThrow(value.length >= 32 ? /example value/ : /S /);
    }
  });

  it("every service refuses to start with NODE_ENV=production and a short INTERNAL_AUTH_SECRET", { timeout: 300_000 }, async () => {
    const env = {
      PATH: process.env.PATH,
      NODE_ENV: "production",
      INTERNAL_AUTH_SECRET: "too-short",
      AGENT_REPLICATION_SECRET: randomBytes(32).toString("base64url"),
      BACKUP_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
      DATABASE_URL: "postgres://nobody@127.0.0.1:1/none",
      IDENTITY_URL: "http://127.0.0.1:1",
      DATABASES_URL: "http://127.0.0.1:1",
      BILLING_URL: "http://127.0.0.1:1",
      OTEL_SDK_DISABLED: "true",
    };
    const mains = [
      "gateway/src/main.ts",
      "services/identity/src/main.ts",
      "services/billing/src/main.ts",
      "services/databases/src/main.ts",
      "services/provisioner-agent/src/main.ts",
    ];
    const results = await Promise.all(
      mains.map((main) =>
        run(process.execPath, ["--import", "tsx", main], { cwd: root, env, timeout: 240_000 }).then(
          () => ({ main, code: 0, stderr: "" }),
          (err: { code?: number; stderr?: string }) => ({ main, code: err.code, stderr: String(err.stderr) }),
        ),
      ),
    );
    for (const r of results) {
      expect(r.code, r.main).not.toBe(0);
      expect(r.stderr, r.main).toContain("INTERNAL_AUTH_SECRET is shorter than 32 bytes");
      expect(r.stderr, r.main).not.toContain("too-short");
    }
  });
});

describe("npm run env:generate", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dbaas-env-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("writes random secrets production accepts, 0600, and never replaces an existing file unless forced", async () => {
    const out = path.join(dir, ".env");
    const generate = (...args: string[]) =>
      run(process.execPath, ["--import", "tsx", "deploy/env-generate.ts", "--out", out, ...args], { cwd: root });
    await generate();
    expect((await stat(out)).mode & 0o777).toBe(0o600);
    const first = await readFile(out, "utf8");
    const values = Object.fromEntries(
      first
        .split("\n")
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    // Exactly what compose requires (its ${NAME:?…} references).
    const compose = await readFile(path.join(root, "docker-compose.yml"), "utf8");
    const required = [...new Set([...compose.matchAll(/\$\{([A-Z0-9_]+):\?/g)].map((m) => m[1]!))].sort();
    expect(Object.keys(values).sort()).toEqual(required);
    for (const [name, value] of Object.entries(values)) requireSecret({ NODE_ENV: "production", [name]: value as string }, name);
    expect(Buffer.from(values.BACKUP_ENCRYPTION_KEY as string, "base64")).toHaveLength(32);

    await expect(generate()).rejects.toMatchObject({ code: 1 });
    expect(await readFile(out, "utf8")).toBe(first);
    await generate("--force");
    expect(await readFile(out, "utf8")).not.toBe(first);
  });

  it(".env is ignored by git", () => {
    expect(execFileSync("git", ["check-ignore", ".env"], { cwd: root }).toString().trim()).toBe(".env");
  });
});
