/**
 * The agent's runtime boundary, enforced (`npm run check:agent-boundary`, part
 * of `npm run check`): outside `src/instances/` (the local-process runtime)
 * only the wiring may import it — `context.ts` builds the runtime, `config.ts`
 * parses its private address. Backups, samples, the meter and everything else
 * reach an instance through `runtime.ts` and `instance-access.ts`, so a second
 * runtime plugs in without touching them. Exits 1 naming every import across.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "src");
const runtimeDir = path.join(src, "instances");
/** The wiring, relative to src/. */
const ALLOWED = new Set(["context.ts", "config.ts"]);

/** Every module specifier of a file: static imports and re-exports, side-effect imports, dynamic import(). */
export function specifiers(text: string): string[] {
  const out: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^;]*?\bfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) out.push(m[1]!);
  return out;
}

function* files(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* files(p);
    else if (e.name.endsWith(".ts")) yield p;
  }
}

/** `file → specifier` for every import of src/instances/ from outside it and the wiring. */
export function violations(root = src): string[] {
  const inside = (p: string, dir: string) => p === dir || p.startsWith(`${dir}${path.sep}`);
  const found: string[] = [];
  for (const file of files(root)) {
    if (inside(file, path.join(root, "instances")) || ALLOWED.has(path.relative(root, file))) continue;
    for (const spec of specifiers(readFileSync(file, "utf8"))) {
      if (!spec.startsWith(".")) continue;
      if (inside(path.resolve(path.dirname(file), spec), path.join(root, "instances")))
        found.push(`${path.relative(root, file)} → ${spec}`);
    }
  }
  return found;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const found = violations();
  if (found.length > 0) {
    console.error(
      `The agent's runtime boundary is crossed (${runtimeDir} is reached only through runtime.ts and instance-access.ts):\n  ${found.join("\n  ")}`,
    );
    process.exit(1);
  }
  console.log("agent runtime boundary: ok");
}
