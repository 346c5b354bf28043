/**
 * An older commit of this repository as a runnable checkout: a git worktree in
 * a temp directory with its own node_modules, removed again afterwards. For
 * benches that compare the stack before a change with the stack after it.
 */
import { execFile } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const run = promisify(execFile);

/** Runs `fn` with the root of a worktree at `ref` whose dependencies are installed. */
export async function withBaselineTree<T>(ref: string, log: (line: string) => void, fn: (root: string) => Promise<T>): Promise<T> {
  const parent = await mkdtemp(join(tmpdir(), "bench-baseline-"));
  // mkdtemp makes it 0700: the instances' unprivileged user must reach the tree's server binaries.
  await chmod(parent, 0o755);
  const root = join(parent, "tree");
  await run("git", ["worktree", "add", "--detach", root, ref], { cwd: repo });
  try {
    const t0 = performance.now();
    // Its lock file names only this platform's optional packages, which `npm ci` refuses; install resolves from the cache.
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], { cwd: root, maxBuffer: 16 * 2 ** 20 });
    log(`  worktree ${ref} at ${root}, npm install ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    return await fn(root);
  } finally {
    await run("git", ["worktree", "remove", "--force", root], { cwd: repo });
    await rm(parent, { recursive: true, force: true });
  }
}
