import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["services/*/test/**/*.test.ts", "gateway/test/**/*.test.ts", "test/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    env: { LOG_LEVEL: "silent" },
  },
});
