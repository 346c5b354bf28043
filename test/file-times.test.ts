/** The reporter .ci/run adds to vitest's default one: each test file's time, then the ten slowest. */
import { describe, expect, it } from "vitest";
import { report, type FileTime } from "./support/file-times.ts";

const times: FileTime[] = Array.from({ length: 12 }, (_, i) => ({
  file: `t/f${String((i * 5) % 12).padStart(2, "0")}.test.ts`,
  ms: 1_000 * (i + 1),
  state: "passed",
}));

describe("the CI reporter's time per test file", () => {
  it("lists every file by path, then the ten slowest, slowest first", () => {
    const text = report([...times, { file: "t/broken.test.ts", ms: 50_000, state: "failed" }]);
    const [every, slowest] = text
      .trim()
      .split("\n\n")
      .map((block) => block.split("\n"));
    expect(every![0]).toBe("Time per test file (13 files, 128.0 s in all, across the workers):");
    const files = every!.slice(1).map((l) => l.trim().split(/\s+/)[2]);
    expect(files).toHaveLength(13);
    expect(files).toEqual([...files].sort());
    expect(slowest![0]).toBe("The 10 slowest:");
    expect(slowest!.slice(1)).toHaveLength(10);
    expect(slowest![1]).toBe("   50.0 s  t/broken.test.ts  (failed)");
    const seconds = slowest!.slice(1).map((l) => Number(l.trim().split(" ")[0]));
    expect(seconds).toEqual([50, 12, 11, 10, 9, 8, 7, 6, 5, 4]);
  });

  it("prints nothing when no file ran", () => {
    expect(report([])).toBe("");
  });
});
