/**
 * The fencing watchdog's entry point (watchdog.ts): started by the agent, detached, as
 * `node [loader] watchdog-main.ts --agent-data-dir <dir>`. It imports nothing but Node and watchdog.ts, so it
 * starts in a fraction of the agent's time and holds little memory.
 */
import { DATA_DIR_ARG, runWatchdog } from "./watchdog.ts";

const i = process.argv.indexOf(DATA_DIR_ARG);
const dataDir = i > 0 ? process.argv[i + 1] : undefined;
if (!dataDir) {
  process.stderr.write(`usage: watchdog-main ${DATA_DIR_ARG} <the agent's data directory>\n`);
  process.exit(2);
}
const stop = new AbortController();
for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => stop.abort());
// No terminal: a hang-up means nothing to it.
process.on("SIGHUP", () => {});
const why = await runWatchdog({ dataDir, signal: stop.signal });
process.stdout.write(`watchdog: ${why}\n`);
process.exit(0);
