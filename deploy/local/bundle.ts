/**
 * The local stack runs each service from a bundle built when it starts, not
 * through tsx: a restarted service (the runner restarts a killed one at once)
 * is back in about a quarter of the time. Measured on an idle 2-core machine:
 * the gateway took 2.0–2.3 s from spawn to listening under tsx (transforming
 * and resolving several hundred modules, ours and our dependencies') and
 * 0.5–0.6 s from a bundle; under write load the difference decided whether a
 * killed service was answering again within 5 s (docs/reliability.md).
 *
 * One esbuild run bundles every entry (shared code split into chunks), without
 * source maps: an inline map made the gateway
 * ~20% slower to start (the source text to compile nearly doubles), and a
 * stack trace still names the function and, in the bundle, the source file
 * above it. What the bundles may not change:
 * - our files that find things next to themselves (`import.meta.url`:
 *   migrations, the console's build, static pages, `createRequire`) see their
 *   own source location, as under tsx: each file's `import.meta.url` is
 *   replaced with that file's URL;
 * - packages that read files relative to their own location (`__dirname`,
 *   `__filename`, `import.meta.url`: PDFKit's fonts, pino's worker threads) are
 *   not bundled: they are imported from their installed path. A bundled package
 *   that does so is a build error, so a new dependency cannot break silently.
 *
 * Bundles are shared by every stack of a checkout through a cache
 * (`node_modules/.cache/dbaas-bundles`): a build is reused while every file it
 * was made from (esbuild's metafile: ours and the bundled packages') has the
 * size and modification time it had. A test run starts dozens of stacks; each
 * bundling again cost ~3 s on an idle 2-core machine and 35–50 s on a loaded one.
 * A build goes into a directory of its own and becomes current by an atomic
 * rename of the manifest, so stacks starting at once never see half a build and
 * a running stack's bundles (which its restarts read) are never overwritten;
 * builds a day old that are not current are removed.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";

/** Loaded from node_modules as they are; `pg-native` is pg's optional native driver (not installed, never asked for). */
const NOT_BUNDLED = ["pdfkit", "pino", "thread-stream", "@opentelemetry/sdk-node", "pg-native"];
const LOCATION = /\b__dirname\b|\b__filename\b|\bimport\.meta\.url\b/;

const packageName = (specifier: string) =>
  specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");

function keepLocations(): Plugin {
  return {
    name: "keep-locations",
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === "resolving" || !NOT_BUNDLED.includes(packageName(args.path))) return undefined;
        const found = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "resolving" });
        // Imported by absolute path: the bundle lives outside the repository's node_modules tree.
        return found.errors.length === 0 ? { path: found.path, external: true } : { path: args.path, external: true };
      });
      b.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
        const source = await readFile(args.path, "utf8");
        if (!LOCATION.test(source)) return undefined;
        if (args.path.includes("/node_modules/")) {
          return {
            errors: [{ text: `${args.path} reads files relative to itself: add its package to NOT_BUNDLED in deploy/local/bundle.ts` }],
          };
        }
        const loader = args.path.endsWith(".ts") ? "ts" : "js";
        return { contents: source.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)), loader };
      });
    },
  };
}

/** A build in the cache: where its bundles are and what they were made from. */
interface Manifest {
  build: string;
  entries: Record<string, string>;
  /** Input path (relative to the root) → "size:mtimeMs". */
  inputs: Record<string, string>;
}

const DAY_MS = 24 * 3600 * 1000;

async function fingerprint(file: string): Promise<string | undefined> {
  const st = await stat(file).catch(() => undefined);
  return st ? `${st.size}:${st.mtimeMs}` : undefined;
}

/** The current build when it was made from exactly `entries` and none of its inputs changed since. */
async function reusable(root: string, cache: string, entries: Record<string, string>): Promise<Manifest | undefined> {
  let m: Manifest;
  try {
    m = JSON.parse(await readFile(join(cache, "manifest.json"), "utf8")) as Manifest;
  } catch {
    return undefined;
  }
  if (JSON.stringify(m.entries) !== JSON.stringify(entries)) return undefined;
  for (const [input, print] of Object.entries(m.inputs)) if ((await fingerprint(join(root, input))) !== print) return undefined;
  for (const name of Object.keys(entries)) if ((await fingerprint(join(cache, m.build, `${name}.mjs`))) === undefined) return undefined;
  return m;
}

async function bundle(root: string, outDir: string, entries: Record<string, string>): Promise<string[]> {
  const result = await build({
    absWorkingDir: root,
    entryPoints: entries,
    outdir: outDir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "error",
    metafile: true,
    // CommonJS packages inside an ES module bundle still call require() for Node's built-ins.
    banner: { js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);' },
    plugins: [keepLocations()],
  });
  return Object.keys(result.metafile.inputs);
}

/**
 * The bundles of `entries` (name → source path, relative to `root`), as
 * `<name>.mjs` in one directory: the cached build when it is still what the
 * sources make, a new one otherwise. Returns name → bundle path and whether the
 * cache served them.
 */
export async function bundleServices(
  root: string,
  entries: Record<string, string>,
): Promise<{ paths: Record<string, string>; reused: boolean }> {
  const cache = join(root, "node_modules", ".cache", "dbaas-bundles");
  const paths = (dir: string) => Object.fromEntries(Object.keys(entries).map((name) => [name, join(dir, `${name}.mjs`)]));
  const found = await reusable(root, cache, entries);
  if (found) return { paths: paths(join(cache, found.build)), reused: true };
  const id = `${Date.now()}-${randomBytes(4).toString("hex")}`;
  const dir = join(cache, id);
  await mkdir(dir, { recursive: true });
  const inputs: Record<string, string> = {};
  for (const input of await bundle(root, dir, entries)) {
    const print = await fingerprint(join(root, input));
    if (print) inputs[input] = print;
  }
  const manifest: Manifest = { build: id, entries, inputs };
  const tmp = join(cache, `manifest.json.${id}`);
  await writeFile(tmp, JSON.stringify(manifest));
  await rename(tmp, join(cache, "manifest.json"));
  // Old builds: a day is longer than any stack of a test run lives.
  for (const name of await readdir(cache)) {
    const at = Number(name.split("-")[0]);
    if (name !== id && /^\d+-[0-9a-f]{8}$/.test(name) && Date.now() - at > DAY_MS)
      await rm(join(cache, name), { recursive: true, force: true });
  }
  return { paths: paths(dir), reused: false };
}
