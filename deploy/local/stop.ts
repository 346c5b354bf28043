/**
 * `npm run stop`: stops the local stack started from this data directory
 * (DBAAS_DATA_DIR, default ./.dbaas) — from another terminal, or after the
 * terminal running `npm start` is gone. A live runner gets SIGTERM and stops
 * everything as Ctrl-C would; what a killed runner left running is stopped
 * directly (its children, then any PostgreSQL below the data directory).
 */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { localStackLayout } from "@dbaas/kit";
import { clearRunFiles, liveRunner, stopLeftovers } from "./run-state.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const { dataDir } = localStackLayout();
const say = (line: string) => process.stdout.write(`${line}\n`);

const runner = liveRunner(dataDir, root);
if (runner !== undefined) {
  say(`stopping the stack running from ${dataDir} (runner pid ${runner})…`);
  process.kill(runner, "SIGTERM");
  const deadline = Date.now() + 90_000;
  while (liveRunner(dataDir, root) === runner && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  if (liveRunner(dataDir, root) === runner) {
    process.stderr.write(`the runner (pid ${runner}) did not stop within 90 s\n`);
    process.exit(1);
  }
}
const left = await stopLeftovers(dataDir, root, (line) => say(`left over: ${line}`));
if (runner === undefined && left.services.length + left.postmasters.length === 0) {
  say(`no stack is running from ${dataDir}`);
} else {
  await clearRunFiles(dataDir);
  say("stopped.");
}
