import { describe, expect, it } from "vitest";
import { restoreInstant, toLocalInput } from "../src/format.ts";

describe("restoreInstant", () => {
  const earliest = "2026-11-28T02:08:15.599Z";
  const latest = "2026-11-28T02:09:02.885Z";

  it("the picker's second that holds the window's first or last instant means that instant", () => {
    // The picker shows seconds: the window's first instant is offered floored, a fraction before the window.
    expect(restoreInstant(toLocalInput(earliest), earliest, latest)).toBe(earliest);
    // … and the last one floored too: that second means the last instant, or its last 885 ms would be lost
    // (a table made in that second was missing from a restore to the picker's default).
    expect(restoreInstant(toLocalInput(latest), earliest, latest)).toBe(latest);
    expect(restoreInstant(toLocalInput("2026-11-28T02:09:03.100Z"), earliest, "2026-11-28T02:09:02.885Z")).toBe("2026-11-28T02:09:02.885Z");
  });

  it("an instant inside the window is sent as picked, one further out too (for the API to refuse)", () => {
    expect(restoreInstant(toLocalInput("2026-11-28T02:08:30Z"), earliest, latest)).toBe("2026-11-28T02:08:30.000Z");
    expect(restoreInstant(toLocalInput("2026-11-28T02:00:00Z"), earliest, latest)).toBe("2026-11-28T02:00:00.000Z");
  });
});
