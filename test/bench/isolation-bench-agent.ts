/**
 * One agent's instance side for isolation-bench.ts, in a process of its own so that the bench can run one as root
 * (a uid of its own per server, a cgroup per server) and one as `nobody` (the shared-uid fallback: every server as
 * the agent, no cgroups) side by side. Builds the instance manager and runtime as the agent does (its meter of
 * `<mode>` through `<nftPath>`), prepares (templates), prints one JSON line saying what it got, then answers JSON
 * lines on stdin: `create` (create + start, timed), `destroy`, `limits` (the server's cgroup counters), `close`.
 */
import { createInterface } from "node:readline";
import { createInstanceManager } from "../../services/provisioner-agent/src/instances/instance-manager.ts";
import { createLocalProcessRuntime } from "../../services/provisioner-agent/src/instances/local-runtime.ts";
import { createConnectionMeter, type ConnectionMeterMode } from "../../services/provisioner-agent/src/proxy/meter.ts";
import type { InstanceSettings } from "../../services/provisioner-agent/src/runtime.ts";

const [dataDir, agentId, mode, nftPath] = process.argv.slice(2);
if (!dataDir || !agentId || !mode || !nftPath) throw new Error("usage: isolation-bench-agent.ts <dataDir> <agentId> <meter> <nftPath>");

const log: string[] = [];
const proxy = createConnectionMeter({
  mode: mode as ConnectionMeterMode,
  dataDir,
  agentId,
  listenAddress: "127.0.0.1",
  nftPath,
  // As context.ts: the servers' own uids (the range) and the agent's (the shared-uid servers').
  localUids: [process.getuid!(), [200_000, 299_999]],
  log: (m) => log.push(m),
});
const m = createInstanceManager({ dataDir, agentId, proxy, log: (l) => log.push(l) });
const runtime = createLocalProcessRuntime(m);
await runtime.prepare();
const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
say({
  uid: process.getuid!(),
  isolation: runtime.isolation,
  resourceLimits: runtime.resourceLimits,
  meter: log.filter((l) => /nftables|proxy/.test(l)),
});

type Request =
  | { op: "create"; id: string; settings: InstanceSettings }
  | { op: "destroy"; id: string }
  | { op: "limits"; id: string }
  | { op: "close" };

for await (const line of createInterface({ input: process.stdin })) {
  const r = JSON.parse(line) as Request;
  try {
    if (r.op === "create") {
      const t0 = performance.now();
      await runtime.create(r.id, { version: "17" });
      await runtime.start(r.id, r.settings);
      say({ ok: true, ms: performance.now() - t0 });
    } else if (r.op === "destroy") {
      await runtime.destroy(r.id);
      say({ ok: true });
    } else if (r.op === "limits") {
      say({ ok: true, stats: (await m.limitStats(r.id)) ?? null });
    } else {
      await runtime.shutdown();
      await proxy.close();
      say({ ok: true });
      process.exit(0);
    }
  } catch (e) {
    say({ ok: false, error: (e as Error).message });
  }
}
