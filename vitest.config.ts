import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  // The console's components (console/src, Preact) and the Node client from its source, as console/vite.config.ts builds them.
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  resolve: { alias: { "@dbaas/client": fileURLToPath(new URL("sdks/node/src/index.ts", import.meta.url)) } },
  test: {
    include: ["services/*/test/**/*.test.ts", "gateway/test/**/*.test.ts", "test/**/*.test.ts", "console/test/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two test files at a time even on 2 cores (vitest's default there is one): most of an end-to-end file's time
    // is spent waiting on real processes (servers starting, WAL archived, backups). The whole suite on this
    // 2-core machine: 994 s one at a time, 613 s two at a time (docs/decisions.md). `--maxWorkers=1` runs them in turn.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // Every logger of a test process writes nothing; TEST_LOG_LEVEL=warn (or info) to see them while debugging.
    env: { LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent" },
  },
});
