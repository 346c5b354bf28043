import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

/**
 * Gives the cgroup of the server in `dataDir` and its parent the CPU weight of `n` processes of the default weight
 * (v1 cpu.shares 1024 × n, v2 cpu.weight 100 × n); returns what was written. A server's cgroup is one scheduling
 * entity of its tier's weight (1024 × vCPUs) however many of its backends are busy, while each process of the
 * cgroup the shared-uid servers run in (the agent's, here the root one with every other process of this shared
 * machine) weighs 1024 on its own.
 */
export async function setWeight(dataDir: string, n: number): Promise<string> {
  const pid = Number((await readFile(join(dataDir, "postmaster.pid"), "utf8")).split("\n")[0]);
  const lines = (await readFile(`/proc/${pid}/cgroup`, "utf8")).split("\n");
  const v1 = lines.find((l) => /^\d+:([^:]*,)?cpu(,[^:]*)?:/.test(l));
  const [dir, file, value] = v1
    ? [join("/sys/fs/cgroup/cpu", v1.split(":")[2]!), "cpu.shares", String(1024 * n)]
    : [join("/sys/fs/cgroup", lines.find((l) => l.startsWith("0::"))!.slice(3)), "cpu.weight", String(Math.min(10_000, 100 * n))];
  for (const d of [dirname(dir), dir]) await writeFile(join(d, file), value);
  return `${file} ${value}`;
}
