import { it, expect } from "vitest";
import { createHarness, registerAgent, createDb } from "../harness.ts";

it("diag", async () => {
  const h = await createHarness();
  const t0 = Date.now();
  const log = (m: string) => console.log(`${Date.now() - t0} ${m}`);
  const q = h.ctx.pool.query.bind(h.ctx.pool) as any;
  (h.ctx.pool as any).query = (...a: any[]) => { if (String(a[0]).includes("NOT (desired_state")) log("snapshot query"); return q(...a); };
  const on = h.ctx.feed.onAgent.bind(h.ctx.feed);
  h.ctx.feed.onAgent = (id, fn) => on(id, () => { log("notify " + id); fn(); });
  await registerAgent(h, "w-busy", { regions: ["nbg1"], capacity: 1000 });
  for (let round = 0; round < 5; round++) {
    const abort = new AbortController();
    const it = h.agents.watchAssignments({ agentId: "w-busy" }, { signal: abort.signal })[Symbol.asyncIterator]();
    log("first next");
    await it.next();
    log("got first");
    if (round % 2) await new Promise((r) => setTimeout(r, 50));
    await createDb(h, "o", { region: "nbg1" });
    log("created");
    const r = await Promise.race([it.next().then(() => "msg"), new Promise((r) => setTimeout(() => r("timeout"), 1500))]);
    log("second: " + r);
    abort.abort();
  }
  await h.close();
});
