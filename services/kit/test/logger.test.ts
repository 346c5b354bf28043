import { afterEach, describe, expect, it } from "vitest";
import { createLogger, logLevel, logs } from "../src/logger.ts";

const saved = process.env.LOG_LEVEL;
afterEach(() => {
  if (saved === undefined) delete process.env.LOG_LEVEL;
  else process.env.LOG_LEVEL = saved;
});

/** What a logger made under LOG_LEVEL=`level` writes to stdout and stderr for one line of each level. */
function linesUnder(level: string | undefined): { level: string; stream: string; msg: string }[] {
  if (level === undefined) delete process.env.LOG_LEVEL;
  else process.env.LOG_LEVEL = level;
  const log = createLogger("logger-test").child({ part: "child" });
  const written: { level: string; stream: string; msg: string }[] = [];
  const out = process.stdout.write;
  const err = process.stderr.write;
  const capture = (stream: string) =>
    ((chunk: string) => {
      const line = JSON.parse(chunk) as { level: string; msg: string };
      written.push({ level: line.level, stream, msg: line.msg });
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture("stdout");
  process.stderr.write = capture("stderr");
  try {
    log.info("an info line", { password: "hunter2" });
    log.warn("a warning");
    log.error("an error", { error: new Error("boom") });
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
  return written;
}

describe("LOG_LEVEL", () => {
  it("silent writes nothing, errors included (npm test runs with it)", () => {
    expect(linesUnder("silent")).toEqual([]);
  });

  it("each level writes itself and what is more severe", () => {
    expect(linesUnder("error").map((l) => l.level)).toEqual(["error"]);
    expect(linesUnder("warn").map((l) => l.level)).toEqual(["warn", "error"]);
    expect(linesUnder("info")).toEqual([
      { level: "info", stream: "stdout", msg: "an info line" },
      { level: "warn", stream: "stdout", msg: "a warning" },
      { level: "error", stream: "stderr", msg: "an error" },
    ]);
  });

  it("unset or unknown is info: a typo never hides errors", () => {
    for (const value of [undefined, "", "verbose", "toString", " WARN "]) {
      const expected = value === " WARN " ? ["warn", "error"] : ["info", "warn", "error"];
      expect(linesUnder(value).map((l) => l.level), String(value)).toEqual(expected);
    }
    expect(logLevel({ LOG_LEVEL: "constructor" })).toBe("info");
  });

  it("logs() answers whether a level is written, for work done only to log (the gateway's access log)", () => {
    expect(logs("info", { LOG_LEVEL: "silent" })).toBe(false);
    expect(logs("info", { LOG_LEVEL: "warn" })).toBe(false);
    expect(logs("warn", { LOG_LEVEL: "warn" })).toBe(true);
    expect(logs("error", { LOG_LEVEL: "silent" })).toBe(false);
    expect(logs("info", {})).toBe(true);
  });
});
