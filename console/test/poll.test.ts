// @vitest-environment happy-dom
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startPolling } from "../src/poll.ts";

/** A document whose visibility the test sets. */
function page() {
  const target = new EventTarget();
  const doc = {
    hidden: false,
    addEventListener: target.addEventListener.bind(target),
    removeEventListener: target.removeEventListener.bind(target),
    setHidden(hidden: boolean) {
      doc.hidden = hidden;
      target.dispatchEvent(new Event("visibilitychange"));
    },
  };
  return doc;
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe("startPolling", () => {
  it("reads fast while the value is transitional, then at the idle pace", async () => {
    const statuses = ["provisioning", "provisioning", "running", "running"];
    let reads = 0;
    const seen: string[] = [];
    const doc = page();
    const poller = startPolling(
      async () => statuses[Math.min(reads++, statuses.length - 1)]!,
      { intervalMs: 3_000, idleMs: 30_000, active: (s) => s !== "running" },
      (s) => seen.push(s),
      () => {},
      doc as never,
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(reads).toBe(1);
    await vi.advanceTimersByTimeAsync(3_000);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(seen).toEqual(["provisioning", "provisioning", "running"]);
    // Running: the next read comes 30 s later, not 3 s.
    await vi.advanceTimersByTimeAsync(29_000);
    expect(reads).toBe(3);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(reads).toBe(4);
    poller.stop();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(reads).toBe(4);
  });

  it("idle pace 0 reads once and then only on refresh", async () => {
    let reads = 0;
    const poller = startPolling(
      async () => ++reads,
      { intervalMs: 0, idleMs: 0, active: () => false },
      () => {},
      () => {},
      page() as never,
    );
    await vi.advanceTimersByTimeAsync(600_000);
    expect(reads).toBe(1);
    poller.refresh();
    await vi.advanceTimersByTimeAsync(0);
    expect(reads).toBe(2);
    poller.stop();
  });

  it("never runs two reads at once: a refresh during a read reads again after it", async () => {
    let running = 0;
    let most = 0;
    let reads = 0;
    const poller = startPolling(
      async () => {
        running++;
        most = Math.max(most, running);
        reads++;
        await new Promise((r) => setTimeout(r, 1_000));
        running--;
        return reads;
      },
      { intervalMs: 0, idleMs: 0, active: () => false },
      () => {},
      () => {},
      page() as never,
    );
    poller.refresh();
    poller.refresh();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(most).toBe(1);
    expect(reads).toBe(2);
    poller.stop();
  });

  it("does not read while the tab is hidden, and reads at once when it is shown again", async () => {
    let reads = 0;
    const doc = page();
    const poller = startPolling(
      async () => ++reads,
      { intervalMs: 3_000, idleMs: 3_000, active: () => true },
      () => {},
      () => {},
      doc as never,
    );
    await vi.advanceTimersByTimeAsync(0);
    doc.setHidden(true);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(reads).toBe(1);
    doc.setHidden(false);
    await vi.advanceTimersByTimeAsync(0);
    expect(reads).toBe(2);
    poller.stop();
  });

  it("reports a failed read and keeps polling", async () => {
    let reads = 0;
    const errors: unknown[] = [];
    const poller = startPolling(
      async () => {
        if (++reads === 1) throw new Error("boom");
        return reads;
      },
      { intervalMs: 1_000, idleMs: 1_000, active: () => true },
      () => {},
      (e) => errors.push(e),
      page() as never,
    );
    await vi.advanceTimersByTimeAsync(1_000);
    expect(errors).toHaveLength(1);
    expect(reads).toBe(2);
    poller.stop();
  });
});
