/**
 * An agent process as far as leases go, for ha/watchdog.test.ts, so the test can kill it with SIGKILL: run as
 * `node --import tsx lease-agent-child.ts <dataDir> <primaryId> <leaseMs> <renewMs>`. Over the test's data
 * directory it wires what main.ts does for a highly available primary — the local runtime with the fencing watchdog
 * (started detached from src/instances/watchdog-main.ts), fenceOnStart, the lease keeper — with a control plane
 * that grants the primary's lease at every renewal. It prints `@@ {"renewed": n}` after each renewal.
 */
import { fileURLToPath } from "node:url";
import { createLogger } from "@dbaas/kit";
import { createInstanceManager } from "../../src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../src/instances/local-runtime.ts";
import { createWatchdogControl } from "../../src/instances/watchdog.ts";
import { createLeaseKeeper, fenceOnStart } from "../../src/leases.ts";
import { instanceSpec } from "./fixture.ts";

const [dataDir, id, leaseArg, renewArg] = process.argv.slice(2);
if (!dataDir || !id || !leaseArg || !renewArg) throw new Error("usage: lease-agent-child.ts <dataDir> <primaryId> <leaseMs> <renewMs>");
const leaseMillis = Number(leaseArg);
const log = createLogger("lease-agent-child");
// An agent id of its own: the same one would take over the test host's nftables table (and drop its DNAT entries).
const m = createInstanceManager({ dataDir, agentId: "test-watchdog-agent" });
const runtime = createLocalProcessRuntime(
  m,
  createWatchdogControl({
    dataDir,
    marginMs: 1000,
    entry: fileURLToPath(new URL("../../src/instances/watchdog-main.ts", import.meta.url)),
    nodeArgs: ["--import", "tsx"],
    log: (msg) => log.info(msg),
  }),
);
const fencedAtStart = await fenceOnStart(runtime, dataDir, log);
let renewed = 0;
const keeper = createLeaseKeeper({
  runtime,
  renew: async () => {
    renewed++;
    setImmediate(() => process.stdout.write(`@@ ${JSON.stringify({ renewed })}\n`));
    return { databaseIds: [id], leaseMillis };
  },
  log,
  dataDir,
  renewIntervalMs: Number(renewArg),
  fenceMarginMs: 3000,
  fencedAtStart,
  onFencingChanged: () => {},
});
keeper.setDesired([{ ...instanceSpec({ databaseId: id, port: 1 }), leaseRequired: true }], []);
await keeper.run(new AbortController().signal);
