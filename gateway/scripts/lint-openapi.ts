/**
 * `npm run lint:openapi`: lints the document `GET /v1/openapi.json` serves,
 * generated from the route table as the gateway does (no server needed),
 * with Redocly's recommended rules, warnings as errors (gateway/redocly.yaml).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { openApiDocument } from "../src/routes/openapi.ts";
import { ROUTES } from "../src/routes/table.ts";

const gatewayDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const redocly = join(dirname(createRequire(import.meta.url).resolve("@redocly/cli/package.json")), "bin/cli.js");

/** Runs `redocly lint` on `doc`; `ok` only without a single problem. */
export function lintOpenApi(doc: unknown): { ok: boolean; output: string } {
  const dir = mkdtempSync(join(tmpdir(), "openapi-"));
  try {
    const file = join(dir, "openapi.json");
    writeFileSync(file, JSON.stringify(doc, null, 2));
    const result = spawnSync(
      process.execPath,
      [redocly, "lint", file, "--config", join(gatewayDir, "redocly.yaml"), "--max-problems", "1000"],
      {
        encoding: "utf8",
        // No usage telemetry or update checks from CI.
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
      },
    );
    return { ok: result.status === 0, output: `${result.stdout}${result.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { ok, output } = lintOpenApi(openApiDocument(ROUTES, "https://api.example.net"));
  process.stdout.write(output);
  process.exitCode = ok ? 0 : 1;
}
