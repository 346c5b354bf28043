import { openSync, readFileSync, writeFileSync, writeSync, closeSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countersPath, openCounters } from "../../src/proxy/counter-file.ts";

/** Overwrites bytes of a counter file in place (what a host crash or a stray write would leave). */
function patch(file: string, at: number, bytes: Buffer): void {
  const fd = openSync(file, "r+");
  try {
    writeSync(fd, bytes, 0, bytes.length, at);
  } finally {
    closeSync(fd);
  }
}

describe("persisted proxy counters", () => {
  let dir: string;
  const notes: string[] = [];
  const note = (why: string) => notes.push(why);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "dbaas-counters-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("starts at zero in a new epoch, and a reopen (clean or not, same boot) continues it", () => {
    const a = openCounters(dir, "db1", note);
    const { epoch } = a.read();
    expect(a.read()).toEqual({ epoch, bytesIn: 0n, bytesOut: 0n });
    a.addIn(100);
    a.addOut(5000);
    a.addIn(1);
    // Not closed: what a kill -9 leaves. The page cache holds every write.
    expect(openCounters(dir, "db1", note).read()).toEqual({ epoch, bytesIn: 101n, bytesOut: 5000n });
    const b = openCounters(dir, "db1", note);
    b.addOut(7);
    b.close();
    expect(openCounters(dir, "db1", note).read()).toEqual({ epoch, bytesIn: 101n, bytesOut: 5007n });
    expect(notes).toEqual([]);
  });

  it("counts past 2^53 exactly", () => {
    const c = openCounters(dir, "big", note);
    for (let i = 0; i < 3; i++) c.addOut(2 ** 52);
    c.addOut(1);
    c.close();
    expect(openCounters(dir, "big", note).read().bytesOut).toBe(3n * 2n ** 52n + 1n);
  });

  it("refuses to count once closed", () => {
    const c = openCounters(dir, "closed", note);
    c.close();
    expect(() => c.addIn(1)).toThrow(/closed/);
    expect(openCounters(dir, "closed", note).read().bytesIn).toBe(0n);
  });

  it("a file left unclean by an earlier boot starts a new epoch; a clean one keeps its epoch", () => {
    const file = countersPath(dir, "boot");
    const a = openCounters(dir, "boot", note);
    const { epoch } = a.read();
    a.addIn(10);
    a.close();
    // Closed cleanly, then the host rebooted: the values were fsync'd, so they stand.
    patch(file, 44, Buffer.from("00000000-0000-0000-0000-000000000000"));
    const b = openCounters(dir, "boot", note);
    expect(b.read()).toEqual({ epoch, bytesIn: 10n, bytesOut: 0n });
    b.addIn(5);
    // Now open (dirty) when the host "crashed" and came back with another boot id.
    patch(file, 44, Buffer.from("00000000-0000-0000-0000-000000000000"));
    const c = openCounters(dir, "boot", note);
    expect(c.read().epoch).not.toBe(epoch);
    expect(c.read()).toMatchObject({ bytesIn: 0n, bytesOut: 0n });
    expect(notes.pop()).toMatch(/host restarted/);
  });

  it("a damaged or missing file starts a new epoch", () => {
    const a = openCounters(dir, "dmg", note);
    const { epoch } = a.read();
    a.addIn(3);
    a.close();
    const file = countersPath(dir, "dmg");
    writeFileSync(file, readFileSync(file).subarray(0, 50));
    const b = openCounters(dir, "dmg", note);
    expect(b.read().epoch).not.toBe(epoch);
    expect(b.read().bytesIn).toBe(0n);
    expect(notes.pop()).toMatch(/damaged/);
  });
});
