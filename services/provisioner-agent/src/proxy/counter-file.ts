import { randomUUID } from "node:crypto";
import { closeSync, fdatasyncSync, fsyncSync, openSync, readFileSync, readSync, renameSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";
import type { ProxyCounters } from "./counters.ts";

/*
 * One fixed-size file per database, `<dir>/<id>.counters`, updated in place:
 *
 *   [0, 8)    magic "DBAASPX1"
 *   [8, 44)   epoch (a UUID)
 *   [44, 80)  boot id of the host when the file was last opened (/proc/sys/kernel/random/boot_id)
 *   [80]      1 if closed cleanly (fsync'd after the last write), else 0
 *   [88, 96)  bytesIn, u64 big-endian
 *   [96, 104) bytesOut, u64 big-endian
 *
 * Each counter is written (one 8-byte pwrite) before the chunk it counts is
 * forwarded. The write lands in the page cache, which outlives the process:
 * an agent killed with SIGKILL loses no count, and counts nothing twice (a
 * chunk is counted once, when received). A host crash can drop page-cache
 * writes, so a file from an earlier boot that was not closed cleanly is not
 * trusted: it starts a new epoch. Opening marks the file dirty and fsyncs
 * that, so a clean flag on disk always belongs to the values beside it.
 */
const MAGIC = "DBAASPX1";
const EPOCH_AT = 8;
const BOOT_AT = 44;
const CLEAN_AT = 80;
const IN_AT = 88;
const OUT_AT = 96;
const SIZE = 104;

function currentBootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim().slice(0, 36).padEnd(36);
  } catch {
    // No boot id: every open after a host crash would look like the same boot, so trust nothing unclean.
    return "unknown".padEnd(36);
  }
}

/** One database's counters, open for counting. */
export interface CounterFile {
  read(): ProxyCounters;
  addIn(n: number): void;
  addOut(n: number): void;
  /** fsyncs the values and marks them clean; the file stays valid for the next open. */
  close(): void;
}

export const countersPath = (dir: string, id: string) => path.join(dir, `${id}.counters`);

interface Loaded {
  epoch: string;
  bytesIn: bigint;
  bytesOut: bigint;
}

/** The file's values if they can be trusted, or why not. */
function load(file: string, bootId: string): Loaded | string {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return "no counters yet";
    throw e;
  }
  const b = Buffer.alloc(SIZE + 1);
  let n: number;
  try {
    n = readSync(fd, b, 0, SIZE + 1, 0);
  } finally {
    closeSync(fd);
  }
  if (n !== SIZE || b.toString("latin1", 0, EPOCH_AT) !== MAGIC) return "counter file damaged";
  const clean = b[CLEAN_AT] === 1;
  if (!clean && b.toString("latin1", BOOT_AT, CLEAN_AT) !== bootId) return "not closed cleanly before the host restarted";
  return { epoch: b.toString("latin1", EPOCH_AT, BOOT_AT).trim(), bytesIn: b.readBigUInt64BE(IN_AT), bytesOut: b.readBigUInt64BE(OUT_AT) };
}

/** A fresh file (new epoch, zero counts) put in place atomically. */
function createFile(file: string, bootId: string): Loaded {
  const epoch = randomUUID();
  const b = Buffer.alloc(SIZE);
  b.write(MAGIC, 0, "latin1");
  b.write(epoch, EPOCH_AT, "latin1");
  b.write(bootId, BOOT_AT, "latin1");
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeSync(fd, b, 0, SIZE, 0);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dfd = openSync(path.dirname(file), "r");
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
  return { epoch, bytesIn: 0n, bytesOut: 0n };
}

/**
 * Opens (or starts) the counters of `id` in `dir`. `onNewEpoch` hears why
 * earlier counts were given up, when there were any.
 */
export function openCounters(dir: string, id: string, onNewEpoch: (why: string) => void): CounterFile {
  const file = countersPath(dir, id);
  const bootId = currentBootId();
  let v = load(file, bootId);
  if (typeof v === "string") {
    if (v !== "no counters yet") onNewEpoch(v);
    v = createFile(file, bootId);
  }
  const fd = openSync(file, "r+");
  const scratch = Buffer.alloc(8);
  const head = Buffer.alloc(CLEAN_AT + 1 - BOOT_AT);
  head.write(bootId, 0, "latin1");
  head[CLEAN_AT - BOOT_AT] = 0;
  writeSync(fd, head, 0, head.length, BOOT_AT);
  fdatasyncSync(fd);
  const state = v;
  let open = true;
  const check = () => {
    // A closed descriptor's number may belong to another file by now.
    if (!open) throw new Error(`counters of ${id} are closed`);
  };
  const put = (value: bigint, at: number) => {
    scratch.writeBigUInt64BE(value);
    writeSync(fd, scratch, 0, 8, at);
  };
  return {
    read: () => ({ epoch: state.epoch, bytesIn: state.bytesIn, bytesOut: state.bytesOut }),
    addIn(n) {
      check();
      state.bytesIn += BigInt(n);
      put(state.bytesIn, IN_AT);
    },
    addOut(n) {
      check();
      state.bytesOut += BigInt(n);
      put(state.bytesOut, OUT_AT);
    },
    close() {
      if (!open) return;
      open = false;
      fdatasyncSync(fd);
      writeSync(fd, Buffer.from([1]), 0, 1, CLEAN_AT);
      fdatasyncSync(fd);
      closeSync(fd);
    },
  };
}

/** Removes a purged database's counters. */
export function removeCounters(dir: string, id: string): void {
  try {
    unlinkSync(countersPath(dir, id));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}
