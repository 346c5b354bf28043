/**
 * The restore window's latest instant from WAL samples: stored WAL makes a
 * sample restorable, and an idle stretch (no transaction id assigned, none
 * running) after a restorable sample is restorable too, however much
 * commit-free WAL (snapshots, checkpoints) the server wrote meanwhile.
 */
import { describe, expect, it } from "vitest";
import { contiguousEnd, newestRestorable, type WalSample } from "../../src/backups/window.ts";

const SEG = 16n * 1024n * 1024n;
/** A position `offset` bytes into segment `segno` (timeline-independent numbering). */
const at = (segno: number, offset: bigint) => BigInt(segno) * SEG + offset;

describe("newestRestorable", () => {
  it("takes the newest sample whose WAL is all stored", () => {
    const samples: WalSample[] = [
      { at: 1000, lsn: at(3, 500n) },
      { at: 2000, lsn: at(4, 500n) },
      { at: 3000, lsn: at(5, 500n) },
    ];
    expect(newestRestorable(samples, 4)).toEqual({ at: 2000, keep: samples.slice(1) });
    expect(newestRestorable(samples, 2).at).toBeUndefined();
    // Just past a segment's header needs nothing of that segment.
    expect(newestRestorable([{ at: 5000, lsn: at(6, 40n) }], 5).at).toBe(5000);
  });

  it("extends over later samples while no transaction id was assigned and none ran at the stored one", () => {
    const samples: WalSample[] = [
      { at: 1000, lsn: at(4, 500n), xmax: 900n, quiet: true },
      // A standby snapshot and a checkpoint moved the position into an unswitched segment: no commit.
      { at: 2000, lsn: at(5, 300n), xmax: 900n, quiet: true },
      { at: 3000, lsn: at(5, 600n), xmax: 900n, quiet: true },
    ];
    expect(newestRestorable(samples, 4).at).toBe(3000);
  });

  it("stops extending at the first sample after a transaction id was assigned", () => {
    const samples: WalSample[] = [
      { at: 1000, lsn: at(4, 500n), xmax: 900n, quiet: true },
      { at: 2000, lsn: at(5, 300n), xmax: 900n, quiet: true },
      { at: 3000, lsn: at(5, 900n), xmax: 901n, quiet: true },
      { at: 4000, lsn: at(5, 900n), xmax: 901n, quiet: true },
    ];
    expect(newestRestorable(samples, 4).at).toBe(2000);
  });

  it("does not extend from a sample at which a transaction was running (it may commit later without a new id)", () => {
    const samples: WalSample[] = [
      { at: 1000, lsn: at(4, 500n), xmax: 900n, quiet: false },
      { at: 2000, lsn: at(5, 300n), xmax: 900n, quiet: true },
    ];
    expect(newestRestorable(samples, 4).at).toBe(1000);
  });

  it("ignores samples without the horizon (taken by an older agent)", () => {
    const samples: WalSample[] = [
      { at: 1000, lsn: at(4, 500n) },
      { at: 2000, lsn: at(5, 300n) },
    ];
    expect(newestRestorable(samples, 4).at).toBe(1000);
  });
});

describe("contiguousEnd", () => {
  it("is the last segment of the unbroken run from the first needed", () => {
    expect(contiguousEnd(new Set([3, 4, 5, 7]), 3)).toBe(5);
    expect(contiguousEnd(new Set([4, 5]), 3)).toBe(2);
  });
});
