import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * The console is built into console/dist: index.html (served by the gateway
 * at `/` and at each of the console's routes) and its hashed files under
 * /console-assets/ (gateway/src/console.ts). The Node client is compiled from
 * its source; its two Node-only imports are replaced by their browser
 * equivalents (src/shims).
 */
export default defineConfig({
  root: here("."),
  base: "/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  resolve: {
    alias: {
      "@dbaas/client": here("../sdks/node/src/index.ts"),
      "node:crypto": here("src/shims/crypto.ts"),
      "node:timers/promises": here("src/shims/timers.ts"),
    },
  },
  // The client reads DBAAS_URL / DBAAS_TOKEN from the environment in Node; the console passes both explicitly.
  define: { "process.env": "{}" },
  // `npm run dev -w console`: the API of a running stack (`npm start`) behind Vite's own origin.
  server: { proxy: { "/v1": process.env.DBAAS_URL ?? "http://127.0.0.1:8080" } },
  build: {
    outDir: here("dist"),
    emptyOutDir: true,
    assetsDir: "console-assets",
    target: "es2022",
    // The charts (uPlot) are loaded with the pages that draw them, not with the first page.
    chunkSizeWarningLimit: 200,
  },
});
