import { constants } from "node:fs";
import { type FileHandle, open, readdir } from "node:fs/promises";
import path from "node:path";
import { redactFields } from "./redact.ts";

/**
 * The server's log as the customer reads it (docs/product.md, Inside the database): the jsonlog files the logging
 * collector writes into the instance's log directory (server-config.ts `loggingSettings`), one JSON object a line,
 * files named by the UTC time they were opened (`postgresql-YYYYMMDD-HHMMSS.json`), so name order is time order.
 *
 * Reads are bounded: files are scanned in chunks of {@link CHUNK} bytes (what lines are split in and the pre-filter
 * tests), never whole, read from the file through a buffer that grows with the scan ({@link fileReader}: one chunk
 * first, up to {@link MAX_READ} bytes a read); a line longer than {@link MAX_LINE}
 * is skipped; one read scans at most `maxScanBytes` (default {@link MAX_SCAN_BYTES}) and answers a cursor where it
 * stopped. The newest entries are found by reading backwards from the end; a position (file, byte offset of a line's
 * start) is a cursor: `after` reads forward from it (what a tail polls with), `before` backwards. A line still being
 * written (no newline yet) is not read until it is complete. The directory is the tenant server's to write, so only
 * regular files (opened with O_NOFOLLOW) owned by the server's uid are read.
 */

export const CHUNK = 64 * 1024;
/** The largest read from a file: a long scan reads this much at once and scans it chunk by chunk. */
export const MAX_READ = 1024 * 1024;
export const MAX_LINE = 1024 * 1024;
export const MAX_SCAN_BYTES = 32 * 1024 * 1024;
/** Each text field of an entry is cut at this many characters. */
export const MAX_FIELD_CHARS = 8192;

const FILE_RE = /^postgresql-(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})\.json$/;
/** Entries near a rotation may carry a time slightly past their file's end (a backend's message written late). */
const ROTATION_SKEW_MS = 60_000;

export interface LogEntry {
  time: Date;
  severity: string;
  message: string;
  detail: string;
  hint: string;
  context: string;
  statement: string;
  sqlState: string;
  user: string;
  database: string;
  applicationName: string;
  backendType: string;
  pid: number;
}

/** Where a read stopped: `file` (its name) and the byte offset of a line's start in it. */
export interface LogPosition {
  file: string;
  offset: number;
}

export interface LogCursor extends LogPosition {
  /** `after`: entries written after the position, oldest first; `before`: the entries just before it. */
  direction: "after" | "before";
}

export interface LogFilter {
  since?: Date;
  until?: Date;
  /** The least severe level returned (ERROR: ERROR, FATAL and PANIC). */
  minSeverity?: string;
  /** Case-insensitive text in the message, detail, hint or statement. */
  q?: string;
}

export interface ReadLogOptions extends LogFilter {
  limit: number;
  cursor?: LogCursor;
  maxScanBytes?: number;
  /** Only files owned by this uid are read (the server's); any when undefined. */
  uid?: number;
}

export interface LogPage {
  /** Oldest first. */
  entries: LogEntry[];
  /** Reads on after the newest entry looked at (always set, so a tail can poll with it). */
  next: LogCursor;
  /** Reads the entries before the oldest looked at; undefined when the beginning of the log was reached. */
  prev?: LogCursor;
}

/** Severities, least severe first, as a customer filters them (PostgreSQL's client order: LOG below NOTICE). */
export const SEVERITIES = ["DEBUG", "INFO", "LOG", "NOTICE", "WARNING", "ERROR", "FATAL", "PANIC"] as const;
export function severityRank(s: string): number {
  const u = s.toUpperCase();
  if (u.startsWith("DEBUG")) return 0;
  const i = (SEVERITIES as readonly string[]).indexOf(u);
  return i < 0 ? 2 : i;
}
export const isSeverity = (s: string): boolean => /^DEBUG[1-5]?$/i.test(s) || (SEVERITIES as readonly string[]).includes(s.toUpperCase());

/** The UTC time a log file was opened, from its name; undefined for a name that is not a log file's. */
export function fileStart(name: string): number | undefined {
  const m = FILE_RE.exec(name);
  if (!m) return undefined;
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
}

export const isLogFileName = (name: string): boolean => FILE_RE.test(name);

/** The log files of `dir`, oldest first; none when it does not exist. */
export async function listLogFiles(dir: string): Promise<string[]> {
  const names = await readdir(dir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") return [] as string[];
    throw e;
  });
  return names.filter(isLogFileName).sort();
}

const CURSOR_RE = /^(a|b):(postgresql-\d{8}-\d{6}\.json):(\d{1,15})$/;

export function encodeCursor(c: LogCursor): string {
  return Buffer.from(`${c.direction === "after" ? "a" : "b"}:${c.file}:${c.offset}`).toString("base64url");
}

/** The cursor `s` encodes, or undefined for one this reader never gave. */
export function decodeCursor(s: string): LogCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(s)) return undefined;
  const m = CURSOR_RE.exec(Buffer.from(s, "base64url").toString("utf8"));
  if (!m) return undefined;
  return { direction: m[1] === "a" ? "after" : "before", file: m[2]!, offset: Number(m[3]) };
}

/** A log file, opened without following a link, if it is a regular file (owned by `uid` when given). */
async function openLog(dir: string, name: string, uid: number | undefined): Promise<{ fh: FileHandle; size: number } | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path.join(dir, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  const st = await fh.stat();
  if (!st.isFile() || (uid !== undefined && st.uid !== uid)) {
    await fh.close();
    return undefined;
  }
  return { fh, size: st.size };
}

const cut = (v: unknown): string => {
  if (v === undefined || v === null) return "";
  const s = String(v);
  return s.length > MAX_FIELD_CHARS ? `${s.slice(0, MAX_FIELD_CHARS)}…` : s;
};

/** jsonlog's `timestamp` ("2026-11-28 07:51:24.123 UTC"). */
function parseTime(s: unknown): Date | undefined {
  if (typeof s !== "string") return undefined;
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?) UTC$/.exec(s);
  const d = m ? new Date(`${m[1]}T${m[2]}Z`) : new Date(s);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/** One jsonlog line as an entry (secrets masked), or undefined when it is not one. */
export function parseLine(line: string): LogEntry | undefined {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (!o || typeof o !== "object") return undefined;
  const time = parseTime(o.timestamp);
  if (!time) return undefined;
  const text = redactFields({
    message: cut(o.message),
    detail: cut(o.detail),
    hint: cut(o.hint),
    context: cut(o.context),
    statement: cut(o.statement),
    internalQuery: cut(o.internal_query),
  });
  return {
    time,
    severity: cut(o.error_severity),
    message: text.message,
    detail: text.detail,
    hint: text.hint,
    context: text.context,
    statement: text.statement,
    sqlState: cut(o.state_code),
    user: cut(o.user),
    database: cut(o.dbname),
    applicationName: cut(o.application_name),
    backendType: cut(o.backend_type),
    pid: typeof o.pid === "number" ? o.pid : 0,
  };
}

/** A test of raw bytes `data[start, end)` (whole lines): false only when no line in them can match. */
export type ChunkTest = (data: Buffer, start: number, end: number) => boolean;

/** What PostgreSQL's jsonlog writes for `s` inside a JSON string (escape_json): `"` and `\` escaped, the rest as is. */
const jsonEscaped = (s: string): string => JSON.stringify(s).slice(1, -1);

/**
 * Non-ASCII characters whose lower case holds an ASCII letter (U+0130 İ → "i̇", U+212A KELVIN SIGN → "k"), as their
 * UTF-8 bytes read as Latin-1: a chunk holding them may match an ASCII needle with that letter (the reader test checks
 * that no other character does).
 */
export const LOWERS_TO_ASCII: Readonly<Record<string, string>> = { i: "\u00c4\u00b0", k: "\u00e2\u0084\u00aa" };

/**
 * A compiled filter: a test of a whole chunk's raw bytes first (chunk: a necessary condition for any of its lines, so
 * a chunk that fails is not split into lines), then of the raw line (also a necessary condition), then of the entry.
 */
export function matcher(f: LogFilter): { chunk?: ChunkTest; raw: (line: string) => boolean; entry: (e: LogEntry) => boolean } {
  const q = f.q?.toLowerCase();
  const min = f.minSeverity ? severityRank(f.minSeverity) : 0;
  const since = f.since?.getTime();
  const until = f.until?.getTime();
  // The text fields stand in the raw line JSON-escaped: `"` and `\` as `\"` and `\\` (lower case commutes with
  // that). A control character (a newline joins the fields the entry's test searches) leaves the line to the entry.
  // jsonlog escapes nothing else: what a non-ASCII character is, it writes in UTF-8.
  const rawQ = q && ![...q].some((ch) => ch.charCodeAt(0) < 0x20) ? jsonEscaped(q) : undefined;
  // jsonlog writes `"error_severity":"ERROR"` as it is: a line naming none of the wanted ones is not parsed.
  const wanted = min > 0 ? ["DEBUG1", "DEBUG2", "DEBUG3", "DEBUG4", "DEBUG5", ...SEVERITIES].filter((s) => severityRank(s) >= min) : [];
  const marks = wanted.map((s) => `"error_severity":"${s}"`);
  const severityOk = (line: string) => !line.includes('"error_severity":"') || marks.some((m) => line.includes(m));
  const chunk = chunkTest(rawQ, min, wanted);
  return {
    ...(chunk && { chunk }),
    raw: (line) => (min === 0 || severityOk(line)) && (!rawQ || line.toLowerCase().includes(rawQ)),
    entry: (e) => {
      if (min > 0 && severityRank(e.severity) < min) return false;
      const t = e.time.getTime();
      if (since !== undefined && t < since) return false;
      if (until !== undefined && t >= until) return false;
      if (q) {
        const hay = `${e.message}\n${e.detail}\n${e.hint}\n${e.statement}`.toLowerCase();
        if (!hay.includes(q)) return false;
      }
      return true;
    },
  };
}

const reEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");

/**
 * The chunk's test: the severity marks and the needle searched in the chunk's bytes at once, never line by line.
 * An ASCII needle is a case-insensitive regular expression over the bytes read as Latin-1 (no byte of a UTF-8
 * multi-byte character is ASCII, and a non-ASCII Latin-1 character never matches an ASCII one case-insensitively),
 * with {@link LOWERS_TO_ASCII} as alternatives of its letters; any other needle is searched in the chunk decoded and
 * lower-cased once (a newline ends every context lower case looks at, so the chunk's lower case is its lines').
 */
function chunkTest(rawQ: string | undefined, min: number, wanted: readonly string[]): ChunkTest | undefined {
  // A line without a severity counts as LOG: marks decide only above LOG.
  const sev = min > severityRank("LOG") ? new RegExp(`"error_severity":"(?:${wanted.join("|")})"`) : undefined;
  let ascii: RegExp | undefined;
  let other: string | undefined;
  if (rawQ && /^[\x20-\x7e]*$/.test(rawQ))
    ascii = new RegExp([...rawQ].map((ch) => (LOWERS_TO_ASCII[ch] ? `(?:${ch}|${LOWERS_TO_ASCII[ch]})` : reEscape(ch))).join(""), "i");
  else other = rawQ;
  if (!sev && !ascii && other === undefined) return undefined;
  return (data, start, end) => {
    if (sev || ascii) {
      const text = data.toString("latin1", start, end);
      if (sev && !sev.test(text)) return false;
      if (ascii && !ascii.test(text)) return false;
    }
    return other === undefined || data.toString("utf8", start, end).toLowerCase().includes(other);
  };
}

/** Whether file `i` (of `files`) may hold entries of [since, until), from the times of it and of the next file. */
function fileInWindow(files: readonly string[], i: number, f: LogFilter): boolean {
  const start = fileStart(files[i]!)!;
  if (f.until && start > f.until.getTime() + ROTATION_SKEW_MS) return false;
  const next = i + 1 < files.length ? fileStart(files[i + 1]!)! : Number.POSITIVE_INFINITY;
  if (f.since && next < f.since.getTime() - ROTATION_SKEW_MS) return false;
  return true;
}

type Visit = (line: string, at: LogPosition) => boolean;

/**
 * Lines from `from` onwards, oldest first, to `visit` (which answers true to stop after the line). Resolves with the
 * position after the last line looked at and whether the end of the log was reached.
 */
async function scanForward(
  dir: string,
  files: readonly string[],
  from: LogPosition | undefined,
  visit: Visit,
  budget: number,
  f: LogFilter,
  uid: number | undefined,
  chunkTest?: ChunkTest,
): Promise<{ pos: LogPosition; end: boolean }> {
  let i = from ? files.findIndex((n) => n >= from.file) : 0;
  if (i < 0) return { pos: from ?? { file: files[files.length - 1] ?? "", offset: 0 }, end: true };
  let pos: LogPosition = from && files[i] === from.file ? from : { file: files[i]!, offset: 0 };
  let scanned = 0;
  for (; i < files.length; i++) {
    const name = files[i]!;
    const last = i === files.length - 1;
    let off = name === pos.file ? pos.offset : 0;
    pos = { file: name, offset: off };
    if (!fileInWindow(files, i, f)) {
      if (f.until && fileStart(name)! > f.until.getTime() + ROTATION_SKEW_MS) return { pos, end: true };
      continue;
    }
    const opened = await openLog(dir, name, uid);
    if (!opened) continue;
    const { fh, size } = opened;
    try {
      if (off > size) off = size;
      pos = { file: name, offset: off };
      let carry = Buffer.alloc(0);
      let carryStart = off;
      let skipping = false;
      const file = fileReader(fh, "forward");
      let at = off;
      while (at < size) {
        if (scanned >= budget) return { pos, end: false };
        const piece = await file.read(at, Math.min(CHUNK, size - at), Math.min(size - at, budget - scanned));
        const bytesRead = piece.length;
        if (bytesRead === 0) break;
        scanned += bytesRead;
        const data = carry.length ? Buffer.concat([carry, piece]) : piece;
        at += bytesRead;
        let ls = 0;
        // No line of the chunk can match: none is split or visited, the position moves past its last complete one.
        if (chunkTest) {
          const lastNl = data.lastIndexOf(10);
          if (lastNl !== -1 && !chunkTest(data, 0, lastNl + 1)) {
            skipping = false;
            pos = { file: name, offset: carryStart + lastNl + 1 };
            ls = lastNl + 1;
          }
        }
        for (let nl = data.indexOf(10, ls); nl !== -1; nl = data.indexOf(10, ls)) {
          const lineAt = { file: name, offset: carryStart + ls };
          const endAt = { file: name, offset: carryStart + nl + 1 };
          if (skipping) skipping = false;
          else if (nl > ls && visit(data.toString("utf8", ls, nl), lineAt)) return { pos: endAt, end: false };
          pos = endAt;
          ls = nl + 1;
        }
        const rest = data.length - ls;
        if (rest > MAX_LINE) {
          skipping = true;
          carry = Buffer.alloc(0);
          carryStart = carryStart + data.length;
        } else {
          carry = Buffer.from(data.subarray(ls));
          carryStart += ls;
        }
      }
      // A line without its newline: still being written in the newest file (read it when complete); cut short in an older one.
      if (last) return { pos, end: true };
    } finally {
      await fh.close();
    }
  }
  return { pos, end: true };
}

/**
 * One file read for a scan in one direction: the scan asks for a chunk at a time, the file is read through a buffer,
 * one chunk at first and twice as much at each refill up to {@link MAX_READ} (never more than the scan may still
 * want, `room`), so a short read (a page of the newest entries, a tail's poll) reads what it did before and a long
 * one (a filtered search through a large file) makes few system calls. A chunk answered is valid until the next call.
 */
export function fileReader(fh: FileHandle, direction: "forward" | "backward") {
  let buf = Buffer.alloc(0);
  let start = 0;
  let fill = CHUNK;
  return {
    /** `len` bytes at `at` (fewer at the file's end); `room`: the bytes the scan may still read that way from `at` (`at + len` backwards). */
    async read(at: number, len: number, room: number): Promise<Buffer> {
      if (at >= start && at + len <= start + buf.length) return buf.subarray(at - start, at - start + len);
      const n = Math.max(len, Math.min(fill, room));
      fill = Math.min(fill * 2, MAX_READ);
      const from = direction === "forward" ? at : at + len - n;
      const target = buf.buffer.byteLength >= n && buf.byteOffset === 0 ? Buffer.from(buf.buffer, 0, n) : Buffer.allocUnsafe(n);
      const { bytesRead } = await fh.read(target, 0, n, from);
      buf = target.subarray(0, bytesRead);
      start = from;
      return buf.subarray(Math.min(at - from, bytesRead), Math.min(at - from + len, bytesRead));
    },
  };
}

/**
 * Lines before `from` (the end of the log when undefined), newest first, to `visit`; never below `floor`. Resolves
 * with the start of the oldest line looked at and whether the beginning (or `floor`) was reached.
 */
async function scanBackward(
  dir: string,
  files: readonly string[],
  from: LogPosition | undefined,
  visit: Visit,
  budget: number,
  f: LogFilter,
  uid: number | undefined,
  floor?: LogPosition,
  chunkTest?: ChunkTest,
): Promise<{ pos: LogPosition; start: boolean }> {
  let i = from ? findLastIndex(files, (n) => n <= from.file) : files.length - 1;
  let pos: LogPosition = from ?? { file: files[files.length - 1] ?? "", offset: 0 };
  let scanned = 0;
  for (; i >= 0; i--) {
    const name = files[i]!;
    if (floor && name < floor.file) return { pos, start: true };
    if (!fileInWindow(files, i, f)) {
      const next = i + 1 < files.length ? fileStart(files[i + 1]!)! : Number.POSITIVE_INFINITY;
      if (f.since && next < f.since.getTime() - ROTATION_SKEW_MS) return { pos: { file: name, offset: 0 }, start: true };
      pos = { file: name, offset: 0 };
      continue;
    }
    const opened = await openLog(dir, name, uid);
    if (!opened) {
      pos = { file: name, offset: 0 };
      continue;
    }
    const { fh, size } = opened;
    try {
      const low = floor && floor.file === name ? Math.min(floor.offset, size) : 0;
      let end = from && name === from.file ? Math.min(from.offset, size) : size;
      pos = { file: name, offset: end };
      const file = fileReader(fh, "backward");
      // Bytes not yet looked at, up to the end of the newest line not yet visited (its newline included).
      let carry = Buffer.alloc(0);
      // Until the first newline from the end: what follows it is a line still being written, left out.
      let trailing = true;
      // The line being collected is longer than MAX_LINE: dropped up to its start.
      let skipping = false;
      while (end > low) {
        if (scanned >= budget) return { pos, start: false };
        const len = Math.min(CHUNK, end - low);
        const piece = await file.read(end - len, len, Math.min(end - low, budget - scanned));
        if (piece.length < len) break;
        scanned += len;
        const data = carry.length ? Buffer.concat([piece, carry]) : piece;
        const base = end - len;
        end -= len;
        let le = data.length;
        let tested = !chunkTest;
        for (;;) {
          if (trailing) {
            const nl = data.lastIndexOf(10, le - 1);
            if (nl === -1) break;
            trailing = false;
            le = nl + 1;
            pos = { file: name, offset: base + le };
            continue;
          }
          // No line in data[0, le) can match (the first, maybe partial, is tested again with the chunk before it):
          // none is split or visited, the position moves to the start of the oldest complete one.
          if (!tested && !skipping) {
            tested = true;
            if (!chunkTest!(data, 0, le)) {
              const first = data.indexOf(10);
              if (first !== -1 && first <= le - 2) {
                le = first + 1;
                pos = { file: name, offset: base + le };
              }
              break;
            }
          }
          // data[0, le) ends with the newline of the line being looked for (unless skipping one too long).
          const nl = skipping ? (le > 0 ? data.lastIndexOf(10, le - 1) : -1) : le >= 2 ? data.lastIndexOf(10, le - 2) : -1;
          if (nl === -1) break;
          const ls = nl + 1;
          if (skipping) skipping = false;
          else if (le - 1 > ls) {
            const at = { file: name, offset: base + ls };
            if (visit(data.toString("utf8", ls, le - 1), at)) return { pos: at, start: false };
          }
          pos = { file: name, offset: base + ls };
          le = ls;
        }
        if (trailing || skipping) carry = Buffer.alloc(0);
        else if (le > MAX_LINE) {
          skipping = true;
          carry = Buffer.alloc(0);
        } else carry = Buffer.from(data.subarray(0, le));
      }
      // The range's first line (it starts at `low`: the file's start or the floor, a line's start).
      if (!trailing && !skipping && carry.length > 1 && end <= low) {
        const at = { file: name, offset: low };
        if (visit(carry.toString("utf8", 0, carry.length - 1), at)) return { pos: at, start: low > 0 || i === 0 };
      }
      pos = { file: name, offset: low };
      if (low > 0) return { pos, start: true };
    } finally {
      await fh.close();
    }
  }
  return { pos, start: true };
}

function findLastIndex<T>(a: readonly T[], p: (x: T) => boolean): number {
  for (let i = a.length - 1; i >= 0; i--) if (p(a[i]!)) return i;
  return -1;
}

/**
 * One page of the log of `dir`: without a cursor (or with a `before` one) the newest `limit` entries matching the
 * filter before it, with an `after` cursor the oldest `limit` after it; oldest first either way.
 */
export async function readLog(dir: string, o: ReadLogOptions): Promise<LogPage> {
  const files = await listLogFiles(dir);
  const budget = o.maxScanBytes ?? MAX_SCAN_BYTES;
  const m = matcher(o);
  const entries: LogEntry[] = [];
  const take = (line: string): boolean => {
    if (!m.raw(line)) return false;
    const e = parseLine(line);
    if (!e || !m.entry(e)) return false;
    entries.push(e);
    return entries.length >= o.limit;
  };
  if (files.length === 0) {
    const none = { file: "postgresql-00000000-000000.json", offset: 0 };
    return { entries: [], next: { ...(o.cursor ?? none), direction: "after" } };
  }
  if (o.cursor?.direction === "after") {
    const firstAt: LogPosition[] = [];
    const r = await scanForward(
      dir,
      files,
      o.cursor,
      (line, at) => {
        const before = entries.length;
        const stop = take(line);
        if (entries.length > before && firstAt.length === 0) firstAt.push(at);
        return stop;
      },
      budget,
      o,
      o.uid,
      m.chunk,
    );
    return { entries, next: { ...r.pos, direction: "after" }, prev: { ...(firstAt[0] ?? o.cursor), direction: "before" } };
  }
  // Backwards: the end of the log (or the cursor) is where a following read goes on.
  let newestEnd: LogPosition | undefined;
  const r = await scanBackward(
    dir,
    files,
    o.cursor,
    (line, at) => {
      newestEnd ??= { file: at.file, offset: at.offset + Buffer.byteLength(line) + 1 };
      return take(line);
    },
    budget,
    o,
    o.uid,
    undefined,
    m.chunk,
  );
  entries.reverse();
  const next = o.cursor ?? (await endOfLog(dir, files, o.uid)) ?? newestEnd ?? { file: files[files.length - 1]!, offset: 0 };
  return { entries, next: { ...next, direction: "after" }, ...(!r.start && { prev: { ...r.pos, direction: "before" } }) };
}

/** The position after the last complete line of the newest file. */
async function endOfLog(dir: string, files: readonly string[], uid: number | undefined): Promise<LogPosition | undefined> {
  for (let i = files.length - 1; i >= 0; i--) {
    const name = files[i]!;
    const opened = await openLog(dir, name, uid);
    if (!opened) continue;
    const { fh, size } = opened;
    try {
      // Back from the end to the last newline (a line may be half written), a chunk at a time, at most MAX_LINE.
      const chunk = Buffer.allocUnsafe(CHUNK);
      for (let end = size; end > 0 && size - end <= MAX_LINE; ) {
        const len = Math.min(CHUNK, end);
        const { bytesRead } = await fh.read(chunk, 0, len, end - len);
        const nl = chunk.subarray(0, bytesRead).lastIndexOf(10);
        if (nl !== -1) return { file: name, offset: end - len + nl + 1 };
        end -= len;
      }
      return { file: name, offset: 0 };
    } finally {
      await fh.close();
    }
  }
  return undefined;
}

/** Where the log ends now: a mark to read what the server writes from here on ({@link messagesSince}). */
export async function logEnd(dir: string, uid?: number): Promise<LogPosition | undefined> {
  return endOfLog(dir, await listLogFiles(dir), uid);
}

/**
 * The messages written since `mark` (the whole log when undefined), oldest first, one a line, at most the newest
 * `maxBytes` of it: what the agent looks for in a server's output (recovery's progress and outcome).
 */
export async function messagesSince(dir: string, mark: LogPosition | undefined, maxBytes = 4 * 1024 * 1024): Promise<string> {
  const files = await listLogFiles(dir);
  if (files.length === 0) return "";
  const out: string[] = [];
  await scanBackward(
    dir,
    files,
    undefined,
    (line) => {
      const e = parseLine(line);
      if (e) out.push(e.message);
      return false;
    },
    maxBytes,
    {},
    undefined,
    mark,
  );
  return out.reverse().join("\n");
}
