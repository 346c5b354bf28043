/**
 * Every reference in the repository resolves inside it (part of `npm run check:docs`): no file cites the design
 * notes or the specification kept outside the repository (`DESIGN.md`, "spec 2.7", a path into a shared folder),
 * whose facts live in docs/product.md, and every relative link of a Markdown file names a file that exists.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const TEXT = /\.(ts|mts|mjs|js|md|proto|json|ya?ml|py|go|sh|toml)$|(^|\/)(Dockerfile|run)$/;
const SKIP = /(^|\/)(node_modules|dist|gen|generated)\/|package-lock\.json$/;
/** This check and its test, which name what they look for. */
const SELF = ["docs/scripts/references.ts", "test/docs-checks.test.ts"];

/** Citations of documents that are not in the repository. */
export const OUTSIDE = new RegExp(
  ["\\bDESIGN(\\.md)?\\b", "\\b[Ss]pec(\\.md)? §?\\d+(\\.\\d+)*", "/work/" + "shared", "\\.\\./" + "shared/"].join("|"),
);

export interface Finding {
  file: string;
  line: number;
  text: string;
}

/** The citations of outside documents in `text`, and its Markdown links to files that do not exist. */
export function findings(file: string, text: string, exists: (path: string) => boolean): Finding[] {
  const out: Finding[] = [];
  text.split("\n").forEach((line, i) => {
    const outside = OUTSIDE.exec(line);
    if (outside) out.push({ file, line: i + 1, text: `cites "${outside[0]}", which is not in the repository` });
    if (!file.endsWith(".md")) return;
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!.split("#")[0]!;
      if (target === "" || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      if (!exists(join(dirname(file), target))) out.push({ file, line: i + 1, text: `links to ${target}, which does not exist` });
    }
  });
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter((f) => TEXT.test(f) && !SKIP.test(f) && !SELF.includes(f) && existsSync(join(ROOT, f)));
  const all = files.flatMap((f) => findings(f, readFileSync(join(ROOT, f), "utf8"), (p) => existsSync(join(ROOT, p))));
  for (const f of all) console.error(`${f.file}:${f.line}: ${f.text}`);
  if (all.length > 0) {
    console.error(`${all.length} reference(s) that do not resolve inside the repository (the product's rules: docs/product.md)`);
    process.exit(1);
  }
}
