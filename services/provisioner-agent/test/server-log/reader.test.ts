import { appendFile, mkdtemp, open, rm, stat, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CHUNK,
  decodeCursor,
  encodeCursor,
  fileReader,
  type LogCursor,
  type LogEntry,
  LOWERS_TO_ASCII,
  logEnd,
  MAX_LINE,
  MAX_READ,
  messagesSince,
  readLog,
} from "../../src/server-log/reader.ts";
import { pruneLogs } from "../../src/server-log/retention.ts";

/** A jsonlog line as PostgreSQL 17 writes it. */
function line(t: number, message: string, extra: Record<string, unknown> = {}): string {
  const ts = new Date(t).toISOString().replace("T", " ").replace("Z", " UTC");
  return `${JSON.stringify({ timestamp: ts, user: "dbadmin", dbname: "defaultdb", pid: 4242, error_severity: "LOG", message, backend_type: "client backend", ...extra })}\n`;
}

const fileName = (t: number) => {
  const d = new Date(t).toISOString();
  return `postgresql-${d.slice(0, 4)}${d.slice(5, 7)}${d.slice(8, 10)}-${d.slice(11, 13)}${d.slice(14, 16)}${d.slice(17, 19)}.json`;
};

const T0 = Date.UTC(2026, 10, 20, 10, 0, 0);
const messages = (es: LogEntry[]) => es.map((e) => e.message);

/** Every entry, newest first page then backwards with prev cursors. */
async function readAllBackwards(dir: string, limit: number, filter = {}): Promise<string[]> {
  const out: string[][] = [];
  let cursor: LogCursor | undefined;
  for (let i = 0; i < 10_000; i++) {
    const page = await readLog(dir, { limit, ...filter, ...(cursor && { cursor }) });
    out.unshift(messages(page.entries));
    if (!page.prev) break;
    cursor = page.prev;
  }
  return out.flat();
}

describe("the server log reader", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "server-log-"));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function dirWith(name: string, files: Record<string, string>): Promise<string> {
    const dir = path.join(root, name);
    await rm(dir, { recursive: true, force: true });
    await import("node:fs/promises").then((fs) => fs.mkdir(dir, { recursive: true }));
    for (const [f, text] of Object.entries(files)) await writeFile(path.join(dir, f), text);
    return dir;
  }

  it("reads across rotated files in time order: the newest first, then back page by page, then forward with the cursor", async () => {
    const files: Record<string, string> = {};
    let n = 0;
    for (let f = 0; f < 4; f++) {
      const start = T0 + f * 3_600_000;
      let text = "";
      // An empty file (a rotation with nothing logged) in the middle.
      const count = f === 2 ? 0 : 7 + f;
      for (let i = 0; i < count; i++) text += line(start + i * 1000, `m${String(n++).padStart(3, "0")}`);
      files[fileName(start)] = text;
    }
    const dir = await dirWith("rotated", files);
    const all = Array.from({ length: n }, (_, i) => `m${String(i).padStart(3, "0")}`);

    const newest = await readLog(dir, { limit: 5 });
    expect(messages(newest.entries)).toEqual(all.slice(-5));
    expect(newest.prev).toBeDefined();
    for (const limit of [1, 3, 8, 100]) expect(await readAllBackwards(dir, limit)).toEqual(all);

    // From the very beginning forward, in pages of 4, the next cursor of each page continuing exactly.
    const first = await readLog(dir, { limit: 4, cursor: { direction: "after", file: fileName(T0), offset: 0 } });
    const seen = messages(first.entries);
    let next = first.next;
    for (let i = 0; i < 50; i++) {
      const page = await readLog(dir, { limit: 4, cursor: next });
      if (page.entries.length === 0) break;
      seen.push(...messages(page.entries));
      next = page.next;
    }
    expect(seen).toEqual(all);
    // A tail's cursor after the end: nothing new, and the same position again.
    const idle = await readLog(dir, { limit: 10, cursor: newest.next });
    expect(idle.entries).toEqual([]);
    expect(idle.next).toEqual(newest.next);
  });

  it("leaves a line still being written for later and returns it once, when complete", async () => {
    const name = fileName(T0);
    const whole = line(T0, "complete one") + line(T0 + 1000, "complete two");
    const partial = line(T0 + 2000, "being written");
    const dir = await dirWith("partial", { [name]: whole + partial.slice(0, 40) });

    const tail = await readLog(dir, { limit: 10 });
    expect(messages(tail.entries)).toEqual(["complete one", "complete two"]);
    expect(tail.next.offset).toBe(Buffer.byteLength(whole));
    expect(await readLog(dir, { limit: 10, cursor: tail.next })).toMatchObject({ entries: [] });

    await appendFile(path.join(dir, name), partial.slice(40));
    const after = await readLog(dir, { limit: 10, cursor: tail.next });
    expect(messages(after.entries)).toEqual(["being written"]);
    expect(messages((await readLog(dir, { limit: 10, cursor: after.next })).entries)).toEqual([]);
    expect(messages((await readLog(dir, { limit: 10 })).entries)).toEqual(["complete one", "complete two", "being written"]);

    // A half line at the end of a file that was rotated away (a crash mid-write) is skipped, not waited for.
    await writeFile(path.join(dir, fileName(T0 + 3_600_000)), line(T0 + 3_600_000, "next file"));
    await appendFile(path.join(dir, name), line(T0 + 3000, "cut short").slice(0, 30));
    const fwd = await readLog(dir, { limit: 10, cursor: after.next });
    expect(messages(fwd.entries)).toEqual(["next file"]);
    expect(await readAllBackwards(dir, 2)).toEqual(["complete one", "complete two", "being written", "next file"]);
  });

  it("filters by severity (and worse), text, SQLSTATE and time, and masks secrets before it searches", async () => {
    const text =
      line(T0, "checkpoint starting: time") +
      line(T0 + 1000, 'relation "no_such_table" does not exist', {
        error_severity: "ERROR",
        state_code: "42P01",
        statement: "SELECT * FROM no_such_table",
      }) +
      line(T0 + 2000, "terminating connection due to administrator command", { error_severity: "FATAL", state_code: "57P01" }) +
      line(T0 + 3000, 'role "ghost" does not exist', {
        error_severity: "ERROR",
        state_code: "42704",
        statement: "ALTER ROLE ghost PASSWORD 'hunter2-secret'",
      }) +
      line(T0 + 4000, 'syntax error at or near "hunter3"', {
        error_severity: "ERROR",
        state_code: "42601",
        statement: "ALTER ROLE x WITH PASSWORD hunter3",
      }) +
      line(T0 + 5000, "duration: 0.1 ms  statement: ALTER ROLE x PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$abc=:def='") +
      line(T0 + 6000, "a warning", { error_severity: "WARNING" });
    const dir = await dirWith("filters", { [fileName(T0)]: text });

    const errors = await readLog(dir, { limit: 100, minSeverity: "ERROR" });
    expect(errors.entries.map((e) => e.severity)).toEqual(["ERROR", "FATAL", "ERROR", "ERROR"]);
    const warnings = await readLog(dir, { limit: 100, minSeverity: "warning" });
    expect(warnings.entries).toHaveLength(5);

    const found = await readLog(dir, { limit: 100, q: "NO_SUCH_TABLE" });
    expect(found.entries).toHaveLength(1);
    expect(found.entries[0]).toMatchObject({ sqlState: "42P01", statement: "SELECT * FROM no_such_table", user: "dbadmin" });

    const window = await readLog(dir, { limit: 100, since: new Date(T0 + 1000), until: new Date(T0 + 3000) });
    expect(window.entries.map((e) => e.sqlState)).toEqual(["42P01", "57P01"]);

    const everything = JSON.stringify((await readLog(dir, { limit: 100 })).entries);
    for (const secret of ["hunter2", "hunter3", "SCRAM-SHA-256$", "c2FsdA"]) expect(everything).not.toContain(secret);
    const all = (await readLog(dir, { limit: 100 })).entries;
    expect(all.find((e) => e.sqlState === "42704")!.statement).toBe("ALTER ROLE ghost PASSWORD '[redacted]'");
    expect(all.find((e) => e.sqlState === "42601")).toMatchObject({
      message: 'syntax error at or near "[redacted]"',
      statement: "ALTER ROLE x WITH PASSWORD [redacted]",
    });
    expect(all.find((e) => e.message.startsWith("duration"))!.message).toBe(
      "duration: 0.1 ms  statement: ALTER ROLE x PASSWORD '[redacted]'",
    );
    for (const q of ["hunter2", "hunter3", "c2FsdA"]) expect((await readLog(dir, { limit: 100, q })).entries).toEqual([]);
  });

  it("skips whole chunks only when no line in them can match: across chunk boundaries, escaped, any case, any script", async () => {
    const base = Buffer.byteLength(line(T0, "filler "));
    /** Filler lines (~200 bytes, none matching any search below) of exactly `bytes` bytes. */
    const filler = (bytes: number, t: number): string => {
      let out = "";
      for (let i = 0; bytes > 0; i++) {
        const n = bytes - base < 400 ? bytes - base : 200 - base;
        if (n < 0) throw new Error(`cannot fill ${bytes} bytes`);
        const l = line(t + i, `filler ${"x".repeat(n)}`);
        out += l;
        bytes -= Buffer.byteLength(l);
      }
      return out;
    };
    /**
     * A log with two entries holding `mark` (a substring of their raw line) astride a chunk's boundary: the first
     * across offset CHUNK (forward reads' first boundary), the second across size - CHUNK (backward reads' first).
     */
    const straddling = (first: string, second: string, mark: string): string => {
      const at = (l: string) => Buffer.from(l).indexOf(Buffer.from(mark));
      if (at(first) < 0 || at(second) < 0) throw new Error(`${mark} is not in the line`);
      return (
        filler(CHUNK - 1 - at(first), T0) +
        first +
        filler(3 * CHUNK + 777, T0 + 10_000) +
        second +
        filler(CHUNK + 1 - (Buffer.byteLength(second) - at(second)), T0 + 30_000)
      );
    };
    const cases: { name: string; filter: { q?: string; minSeverity?: string }; lines: [string, string]; mark: string }[] = [
      {
        name: "case",
        filter: { q: "needle_AstRide" },
        lines: [line(T0 + 5000, "found NEEDLE_astride one"), line(T0 + 20_000, "found nEEDLE_astride two")],
        mark: "EEDLE_astride",
      },
      {
        // jsonlog writes `"` and `\` escaped: the needle is searched for as written.
        name: "escaped",
        filter: { q: 'at or near "x\\Y"' },
        lines: [
          line(T0 + 5000, 'syntax error at or near "x\\y"', { error_severity: "ERROR" }),
          line(T0 + 20_000, 'syntax error AT OR NEAR "X\\y" again', { error_severity: "ERROR" }),
        ],
        mark: '\\\\y\\"',
      },
      {
        // U+212A KELVIN SIGN is "k" in lower case: an ASCII needle matches it.
        name: "kelvin",
        filter: { q: "kelvin" },
        lines: [line(T0 + 5000, "300 \u212Aelvin one"), line(T0 + 20_000, "300 \u212Aelvin two")],
        mark: "\u212Aelvin",
      },
      {
        name: "non-ascii",
        filter: { q: "ÉCOLE Ünïcode" },
        lines: [line(T0 + 5000, "l'école ünïcode one"), line(T0 + 20_000, "L'ÉCOLE ünïcode two")],
        mark: "ünïcode",
      },
      {
        name: "severity",
        filter: { minSeverity: "error" },
        lines: [line(T0 + 5000, "one failed", { error_severity: "ERROR" }), line(T0 + 20_000, "two failed", { error_severity: "FATAL" })],
        mark: '"error_severity":"',
      },
      {
        name: "severity and text",
        filter: { minSeverity: "WARNING", q: "BOTH" },
        lines: [line(T0 + 5000, "both one", { error_severity: "WARNING" }), line(T0 + 20_000, "both two", { error_severity: "PANIC" })],
        mark: "both",
      },
    ];
    for (const c of cases) {
      const name = fileName(T0);
      const dir = await dirWith(`chunks-${c.name}`, { [name]: straddling(c.lines[0], c.lines[1], c.mark) });
      const want = c.lines.map((l) => JSON.parse(l).message as string);
      // Backwards, the newest page, then page by page from one entry a page.
      expect(messages((await readLog(dir, { limit: 100, ...c.filter })).entries), c.name).toEqual(want);
      for (const limit of [1, 2]) expect(await readAllBackwards(dir, limit, c.filter), c.name).toEqual(want);
      // Forwards from the start, one a page, the cursors going on exactly.
      const seen: string[] = [];
      let cursor: LogCursor = { direction: "after", file: name, offset: 0 };
      for (let i = 0; i < 10; i++) {
        const page = await readLog(dir, { limit: 1, ...c.filter, cursor });
        seen.push(...messages(page.entries));
        if (page.entries.length === 0) break;
        cursor = page.next;
      }
      expect(seen, c.name).toEqual(want);
      // Every entry is still read (nothing skipped without a filter), and a miss finds nothing.
      expect((await readAllBackwards(dir, 1000)).length, c.name).toBeGreaterThan(400);
      expect((await readLog(dir, { limit: 100, ...c.filter, q: `${c.filter.q ?? ""}never there` })).entries).toEqual([]);
    }
  });

  it("knows every character whose lower case holds an ASCII letter", () => {
    const found: string[] = [];
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      for (const lower of ch.toLowerCase()) if (lower.charCodeAt(0) < 0x80) found.push(`${lower}:${Buffer.from(ch).toString("latin1")}`);
    }
    expect(found.sort()).toEqual(
      Object.entries(LOWERS_TO_ASCII)
        .map(([l, bytes]) => `${l}:${bytes}`)
        .sort(),
    );
  });

  it("reads only regular files: a link the tenant planted is not followed, a file of another uid not read", async () => {
    const dir = await dirWith("links", { [fileName(T0)]: line(T0, "own line") });
    const secret = path.join(root, "agent-secret.txt");
    await writeFile(secret, line(T0 + 1000, "the agent's secret"));
    await symlink(secret, path.join(dir, fileName(T0 + 3_600_000)));
    expect(messages((await readLog(dir, { limit: 10 })).entries)).toEqual(["own line"]);
    const uid = (await stat(path.join(dir, fileName(T0)))).uid;
    expect(messages((await readLog(dir, { limit: 10, uid: uid + 1 })).entries)).toEqual([]);
    expect(messages((await readLog(dir, { limit: 10, uid })).entries)).toEqual(["own line"]);
  });

  it("refuses cursors it never gave", () => {
    const c: LogCursor = { direction: "before", file: fileName(T0), offset: 1234 };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
    for (const bad of [
      "",
      "x",
      Buffer.from("a:../../etc/passwd:0").toString("base64url"),
      Buffer.from(`a:${fileName(T0)}:-1`).toString("base64url"),
    ])
      expect(decodeCursor(bad)).toBeUndefined();
  });

  it("reads a very large file in bounded memory: the newest entries fast, a search bounded, an overlong line skipped", async () => {
    const dir = await dirWith("large", {});
    const name = fileName(T0);
    const file = path.join(dir, name);
    // ~512 MiB: 1 MiB blocks of ~250-byte lines, an overlong line (2 MiB) near the end, then the newest lines.
    const block = Array.from({ length: 4096 }, (_, i) => line(T0 + i, `filler line ${i} ${"x".repeat(120)}`)).join("");
    const fh = await open(file, "w");
    const blocks = Math.ceil((512 * 1024 * 1024) / Buffer.byteLength(block));
    for (let i = 0; i < blocks; i++) await fh.write(block);
    await fh.write(line(T0 + 5_000_000, "y".repeat(2 * MAX_LINE)));
    for (let i = 0; i < 50; i++) await fh.write(line(T0 + 6_000_000 + i, `newest ${i}`));
    await fh.close();
    expect((await stat(file)).size).toBeGreaterThan(512 * 1024 * 1024);

    global.gc?.();
    const before = process.memoryUsage();
    let peak = 0;
    const probe = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 5);
    const t = performance.now();
    const page = await readLog(dir, { limit: 60 });
    const newestMs = performance.now() - t;
    expect(messages(page.entries).slice(-50)).toEqual(Array.from({ length: 50 }, (_, i) => `newest ${i}`));
    // The overlong line is skipped whole; the filler before it goes on.
    expect(page.entries[9]!.message).toMatch(/^filler line 4095 /);
    expect(newestMs).toBeLessThan(2000);

    // A search that matches nothing stops at the scan bound and says where to go on.
    const miss = await readLog(dir, { limit: 10, q: "never there", maxScanBytes: 64 * 1024 * 1024 });
    expect(miss.entries).toEqual([]);
    expect(miss.prev).toBeDefined();
    expect(miss.prev!.offset).toBeGreaterThan((await stat(file)).size - 64 * 1024 * 1024 - CHUNK - 2 * MAX_LINE);
    // And forward from the start, also bounded.
    const fwd = await readLog(dir, {
      limit: 10,
      q: "never there",
      cursor: { direction: "after", file: name, offset: 0 },
      maxScanBytes: 8 * 1024 * 1024,
    });
    expect(fwd.entries).toEqual([]);
    expect(fwd.next.offset).toBeLessThanOrEqual(8 * 1024 * 1024 + CHUNK);
    clearInterval(probe);
    peak = Math.max(peak, process.memoryUsage().rss);
    // Never the file in memory: well under the 512 MiB it holds.
    expect(peak - before.rss).toBeLessThan(96 * 1024 * 1024);
    await rm(file);
  }, 180_000);

  it("gives the messages written since a mark (what recovery looks for)", async () => {
    const dir = await dirWith("since", { [fileName(T0)]: line(T0, "before the mark") });
    const mark = await logEnd(dir);
    await appendFile(path.join(dir, fileName(T0)), line(T0 + 1, 'restored log file "000000010000000000000003" from archive'));
    await writeFile(
      path.join(dir, fileName(T0 + 3_600_000)),
      line(T0 + 3_600_000, "recovery ended before configured recovery target was reached"),
    );
    expect(await messagesSince(dir, mark)).toBe(
      'restored log file "000000010000000000000003" from archive\nrecovery ended before configured recovery target was reached',
    );
  });
});

describe("server log retention", () => {
  it("drops files older than the limit and then the oldest beyond the quota, never the newest", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "server-log-retention-"));
    try {
      const day = 86_400_000;
      const now = T0 + 10 * day;
      const names: string[] = [];
      for (const t of [T0, T0 + 2 * day, T0 + 3 * day + 3_600_000, T0 + 4 * day, T0 + 8 * day, T0 + 9 * day, T0 + 10 * day - 60_000]) {
        names.push(fileName(t));
        await writeFile(path.join(dir, fileName(t)), "x".repeat(1000));
      }
      const r = await pruneLogs(dir, { quotaBytes: 1_000_000, maxAgeMs: 7 * day, now });
      // A file goes once the next one began more than 7 days ago (its entries end there).
      expect(r.removed).toEqual(names.slice(0, 1));
      const q = await pruneLogs(dir, { quotaBytes: 2500, maxAgeMs: 7 * day, now });
      expect(q.removed).toEqual(names.slice(1, 5));
      expect(q.keptBytes).toBe(2000);
      // The newest alone over the quota is kept: the server writes it.
      const last = await pruneLogs(dir, { quotaBytes: 10, maxAgeMs: 7 * day, now: now + 30 * day });
      expect(last.removed).toEqual([names[5]]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("the log reader's reads from a file", () => {
  /** A file of `mib` MiB of numbered bytes, open, with its handle's reads counted. */
  async function counted(mib: number) {
    const dir = await mkdtemp(path.join(os.tmpdir(), "server-log-reads-"));
    const file = path.join(dir, "log");
    const bytes = Buffer.alloc(mib * 1024 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + (i >> 16)) & 0xff;
    await writeFile(file, bytes);
    const fh = await open(file, "r");
    const reads: number[] = [];
    const read = fh.read.bind(fh) as (b: Buffer, o: number, n: number, p: number) => Promise<{ bytesRead: number; buffer: Buffer }>;
    (fh as unknown as { read: typeof read }).read = (b, o, n, p) => {
      reads.push(n);
      return read(b, o, n, p);
    };
    const close = async () => {
      await fh.close();
      await rm(dir, { recursive: true, force: true });
    };
    return { bytes, fh, reads, close };
  }

  it("answers a chunk at a time from reads that grow to 1 MiB, backwards and forwards; a short scan reads one chunk", async () => {
    const f = await counted(8);
    try {
      const size = f.bytes.length;
      // Backwards, a chunk at a time from the end, as a filtered search scans: the bytes are the file's.
      const back = fileReader(f.fh, "backward");
      for (let end = size; end > 0; end -= CHUNK) {
        const piece = await back.read(end - CHUNK, CHUNK, end);
        expect(piece.equals(f.bytes.subarray(end - CHUNK, end))).toBe(true);
      }
      // 64 KiB, 128, 256, 512 KiB, then 1 MiB reads: 11 reads for 8 MiB, where a read a chunk took 128.
      expect(f.reads.slice(0, 5)).toEqual([CHUNK, 2 * CHUNK, 4 * CHUNK, 8 * CHUNK, MAX_READ]);
      expect(Math.max(...f.reads)).toBe(MAX_READ);
      expect(f.reads.length).toBeLessThanOrEqual(12);
      expect(f.reads.reduce((a, b) => a + b, 0)).toBe(size);

      f.reads.length = 0;
      const fwd = fileReader(f.fh, "forward");
      for (let at = 0; at < size; at += CHUNK) {
        const piece = await fwd.read(at, CHUNK, size - at);
        expect(piece.equals(f.bytes.subarray(at, at + CHUNK))).toBe(true);
      }
      expect(f.reads.length).toBeLessThanOrEqual(12);

      // Never more than the scan may still want (its budget, the file's start), and one chunk for a short scan.
      f.reads.length = 0;
      const short = fileReader(f.fh, "backward");
      expect((await short.read(size - CHUNK, CHUNK, 100_000)).equals(f.bytes.subarray(size - CHUNK))).toBe(true);
      expect((await short.read(size - 2 * CHUNK, CHUNK, 100_000 - CHUNK)).length).toBe(CHUNK);
      expect(f.reads).toEqual([CHUNK, CHUNK]);
    } finally {
      await f.close();
    }
  });
});
