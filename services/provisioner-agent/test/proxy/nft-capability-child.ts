import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { readConfig } from "../../src/config.ts";
import { createConnectionMeter } from "../../src/proxy/meter.ts";

/**
 * An agent process as far as its meter goes, started by nft-capability.test.ts
 * as an unprivileged user (the container's uid 1000): builds the meter as the
 * agent does (CONNECTION_METER, and NFT_PATH read by its config), serves one
 * database, then answers lines on stdin: `counters` (one JSON line), `close`.
 * Its first line says who it is and what the meter logged.
 */
const [mode, dataDir, agentId, listenAddress, privateAddress, id, port, targetPort] = process.argv.slice(2);
if (!mode || !dataDir || !agentId || !listenAddress || !privateAddress || !id || !port || !targetPort) {
  throw new Error("usage: nft-capability-child.ts <mode> <dataDir> <agentId> <listen> <private> <id> <port> <targetPort>");
}
const log: string[] = [];
const meter = createConnectionMeter({
  mode: mode as "auto" | "nftables" | "proxy",
  dataDir,
  agentId,
  listenAddress,
  privateAddress,
  nftPath: readConfig({
    DATABASES_URL: "http://127.0.0.1:1",
    INTERNAL_AUTH_SECRET: "-",
    AGENT_REPLICATION_SECRET: "-",
    BACKUP_ENCRYPTION_KEY: "ZGJhYXMtYmFja3VwLXRlc3QtbWFzdGVyLWtleS0zMmI=",
    ...process.env,
  }).nftPath,
  log: (m) => log.push(m),
});
await meter.serve(id, { port: Number(port), target: { host: privateAddress, port: Number(targetPort) } });
const capEff = /^CapEff:\s*(\S+)$/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
process.stdout.write(`${JSON.stringify({ uid: process.getuid!(), capEff, log })}\n`);

for await (const line of createInterface({ input: process.stdin })) {
  if (line === "counters") {
    const c = (await meter.counters([id])).get(id);
    process.stdout.write(`${JSON.stringify(c ? { epoch: c.epoch, bytesIn: String(c.bytesIn), bytesOut: String(c.bytesOut) } : null)}\n`);
  } else if (line === "close") {
    await meter.close();
    process.exit(0);
  }
}
