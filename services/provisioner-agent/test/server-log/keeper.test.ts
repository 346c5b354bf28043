import { chown, open, readdir, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { LOG_RETENTION_DAYS, TIER_LOG_QUOTA_MB } from "@dbaas/catalogue";
import { createLogger } from "@dbaas/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogKeeper } from "../../src/server-log/keeper.ts";
import { listLogFiles } from "../../src/server-log/reader.ts";
import { startHost, startInstance, type TestHost, waitFor } from "../support/fixture.ts";

// The log keeper as control-loop.ts wires it (the local-process runtime as its access, the runtime's instances as
// its list) over real servers: each server's log is kept within its own tier's quota (read from the tier it was
// last started with) and 7 days, oldest files first, running or stopped, every interval until stopped.

const MB = 1024 * 1024;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const fileName = (t: number) => {
  const d = new Date(t).toISOString();
  return `postgresql-${d.slice(0, 4)}${d.slice(5, 7)}${d.slice(8, 10)}-${d.slice(11, 13)}${d.slice(14, 16)}${d.slice(17, 19)}.json`;
};

/**
 * Older log files beside what the server wrote, owned as the server's are: two sparse ones of `bigMb` each from
 * two and one hours ago (their size counts against the quota, no disk is used), two small ones 9 and 8 days old.
 */
async function olderLogs(dir: string, bigMb: number): Promise<{ nineDays: string; eightDays: string; twoHours: string; oneHour: string }> {
  const now = Date.now();
  const names = {
    nineDays: fileName(now - 9 * DAY),
    eightDays: fileName(now - 8 * DAY),
    twoHours: fileName(now - 2 * HOUR),
    oneHour: fileName(now - HOUR),
  };
  const owner = await stat(dir);
  for (const [key, name] of Object.entries(names)) {
    const file = path.join(dir, name);
    await writeFile(file, "{}\n", { mode: 0o600 });
    if (key === "twoHours" || key === "oneHour") {
      const h = await open(file, "r+");
      await h.truncate(bigMb * MB);
      await h.close();
    }
    await chown(file, owner.uid, owner.gid);
  }
  return names;
}

describe("the server log keeper as the agent wires it", { timeout: 180_000 }, () => {
  let host: TestHost;

  beforeAll(async () => {
    host = await startHost("logkeeper");
  }, 60_000);

  afterAll(() => host?.close(), 60_000);

  it("drops each server's oldest files beyond its tier's quota and 7 days, whether it runs or not, every interval", async () => {
    // micro keeps 256 MB, small 512 MB: 2 × 200 MB fits the one, not the other.
    expect(TIER_LOG_QUOTA_MB.micro).toBe(256);
    expect(TIER_LOG_QUOTA_MB.small).toBe(512);
    expect(LOG_RETENTION_DAYS).toBe(7);
    const micro = await startInstance(host, "keepmicro", { tier: "micro" });
    const small = await startInstance(host, "keepsmall", { tier: "small" });
    await host.runtime.stop(small.id);
    const dirOf = async (id: string) => (await host.runtime.serverLog(id))!.dir;
    // What each server wrote itself (its starts: a few kB, the newest file among them, which is never dropped).
    const ownOf = (id: string) =>
      waitFor(
        async () => {
          const f = await listLogFiles(await dirOf(id));
          return f.length > 0 && f;
        },
        60_000,
        `${id}'s own log file`,
      );
    const microOwn = await ownOf(micro.id);
    const smallOwn = await ownOf(small.id);
    const microOld = await olderLogs(await dirOf(micro.id), 200);
    const smallOld = await olderLogs(await dirOf(small.id), 200);

    const keeper = createLogKeeper({ access: host.runtime, list: () => host.runtime.list(), log: createLogger("agent-test") });
    const stop = new AbortController();
    const running = keeper.run(200, stop.signal);
    try {
      // micro: the 9-day-old file by age; then the 8-day-old and the 200 MB one of two hours ago by its quota.
      await waitFor(async () => !(await readdir(await dirOf(micro.id))).includes(microOld.twoHours), 60_000, "micro's quota kept");
      expect(await listLogFiles(await dirOf(micro.id))).toEqual([microOld.oneHour, ...microOwn]);
      // small (stopped): only the 9-day-old file, by age; 400 MB is within its quota.
      await waitFor(async () => !(await readdir(await dirOf(small.id))).includes(smallOld.nineDays), 60_000, "small's 7 days kept");
      expect(await listLogFiles(await dirOf(small.id))).toEqual([smallOld.eightDays, smallOld.twoHours, smallOld.oneHour, ...smallOwn]);
      // A later pass finds nothing more to drop.
      expect(await keeper.pass()).toBe(0);
    } finally {
      stop.abort();
      await running;
    }
  });
});
