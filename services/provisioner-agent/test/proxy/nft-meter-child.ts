import { createNftMeter } from "../../src/proxy/nft-meter.ts";

/**
 * An agent process as far as the nftables meter goes: takes its table over,
 * serves one database and waits to be killed (nft-meter.test.ts kills it
 * with SIGKILL while a connection it forwarded is open).
 */
const [dataDir, agentId, id, port, targetHost, targetPort] = process.argv.slice(2);
if (!dataDir || !agentId || !id || !port || !targetHost || !targetPort) {
  throw new Error("usage: nft-meter-child.ts <dataDir> <agentId> <id> <port> <targetHost> <targetPort>");
}
const meter = createNftMeter({ dataDir, agentId, listenAddress: "127.0.0.1" });
await meter.serve(id, { port: Number(port), target: { host: targetHost, port: Number(targetPort) } });
process.stdout.write("serving\n");
setInterval(() => {}, 3_600_000);
