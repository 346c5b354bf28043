import { afterEach, describe, expect, it } from "vitest";
import { createLogger, logLevel, logs, REDACTED_FIELDS } from "../src/logger.ts";

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
      expect(
        linesUnder(value).map((l) => l.level),
        String(value),
      ).toEqual(expected);
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

/** The lines `write` logs, parsed, with the stream each went to (LOG_LEVEL=info). */
function captured(write: () => void): { stream: string; line: Record<string, unknown> }[] {
  process.env.LOG_LEVEL = "info";
  const written: { stream: string; line: Record<string, unknown> }[] = [];
  const out = process.stdout.write;
  const err = process.stderr.write;
  const capture = (stream: string) =>
    ((chunk: string) => {
      expect(chunk.endsWith("\n") && chunk.indexOf("\n") === chunk.length - 1, "one line per write").toBe(true);
      written.push({ stream, line: JSON.parse(chunk) as Record<string, unknown> });
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture("stdout");
  process.stderr.write = capture("stderr");
  try {
    write();
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
  return written;
}

describe("log lines", () => {
  it("are JSON with time, level as a word, service, msg, the base and child fields, then the event's", () => {
    const [info, error] = captured(() => {
      const log = createLogger("svc", { agent_id: "agent-1" }).child({ request_id: "req-1" });
      log.info("listening on %s", { port: 8080, organization_id: "org-1", nested: { a: [1, 2] } });
      log.child({ step: 2 }).error("shutdown hook failed", { error: new Error("boom"), cause: new TypeError("bad") });
    });
    expect(info!.stream).toBe("stdout");
    expect(info!.line).toEqual({
      time: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      level: "info",
      service: "svc",
      agent_id: "agent-1",
      request_id: "req-1",
      // A message is written as given: no printf placeholders.
      msg: "listening on %s",
      port: 8080,
      organization_id: "org-1",
      nested: { a: [1, 2] },
    });
    expect(Math.abs(Date.parse(info!.line.time as string) - Date.now())).toBeLessThan(5_000);
    // An Error is its message: no stack, no cause chain.
    expect(error).toEqual({
      stream: "stderr",
      line: expect.objectContaining({
        level: "error",
        service: "svc",
        request_id: "req-1",
        step: 2,
        msg: "shutdown hook failed",
        error: "boom",
        cause: "bad",
      }),
    });
  });

  it("an event's field wins over a child's of the same name", () => {
    const [line] = captured(() => createLogger("svc").child({ organization_id: "org-child" }).warn("w", { organization_id: "org-event" }));
    expect(line!.line).toMatchObject({ level: "warn", organization_id: "org-event" });
  });

  it("redacts passwords, tokens, secrets, keys, authorization headers and verifiers, at the top and one object down", () => {
    const secret = "hunter2-must-not-appear";
    const event = Object.fromEntries(REDACTED_FIELDS.map((name) => [name, secret]));
    const lines = captured(() => {
      const log = createLogger("svc");
      log.info("top", { ...event, key_id: "key-1", organization_id: "org-1" });
      log.info("nested", {
        headers: { authorization: `Bearer ${secret}`, cookie: secret, "x-dbaas-internal-auth": secret, accept: "application/json" },
        config: { secretKey: secret, apiBase: "http://127.0.0.1:1/v1" },
        spec: { scramVerifier: `SCRAM-SHA-256$4096:${secret}` },
      });
      log.child({ password: secret, token: secret, agent_id: "agent-1" }).warn("child");
    });
    const text = JSON.stringify(lines);
    expect(text).not.toContain(secret);
    const [top, nested, child] = lines.map((l) => l.line);
    for (const name of REDACTED_FIELDS) expect(top![name], name).toBe("[redacted]");
    expect(top).toMatchObject({ key_id: "key-1", organization_id: "org-1" });
    expect(nested).toMatchObject({
      headers: { authorization: "[redacted]", cookie: "[redacted]", "x-dbaas-internal-auth": "[redacted]", accept: "application/json" },
      config: { secretKey: "[redacted]", apiBase: "http://127.0.0.1:1/v1" },
      spec: { scramVerifier: "[redacted]" },
    });
    expect(child).toMatchObject({ password: "[redacted]", token: "[redacted]", agent_id: "agent-1", msg: "child" });
  });

  it("leaves the caller's objects as they were", () => {
    const fields = { password: "p", error: new Error("e"), headers: { authorization: "a" } };
    captured(() => createLogger("svc").error("x", fields));
    expect(fields.password).toBe("p");
    expect(fields.error).toBeInstanceOf(Error);
    expect(fields.headers.authorization).toBe("a");
  });
});
