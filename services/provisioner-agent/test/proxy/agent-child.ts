import { createInstanceManager } from "../../src/instances/instance-manager.ts";

/**
 * An agent process as far as the (in-process) proxy goes: takes over the instances under
 * a data directory that are running, serves their published ports, and waits
 * to be killed (proxy.test.ts kills it with SIGKILL mid-transfer).
 */
const [dataDir, agentId] = process.argv.slice(2);
if (!dataDir || !agentId) throw new Error("usage: agent-child.ts <dataDir> <agentId>");
const m = createInstanceManager({ dataDir, agentId, connectionMeter: "proxy" });
await m.serveRunning();
process.stdout.write("serving\n");
setInterval(() => {}, 3_600_000);
