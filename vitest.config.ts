import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["services/*/test/**/*.test.ts", "gateway/test/**/*.test.ts", "test/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Every logger of a test process writes nothing; TEST_LOG_LEVEL=warn (or info) to see them while debugging.
    env: { LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent" },
  },
});
