/**
 * WAL file names and positions. Instances are created by the agent's initdb
 * with the default 16 MiB segments, so a segment number is `LSN / 16 MiB`.
 */

export const WAL_SEGMENT_BYTES = 16 * 1024 * 1024;
/** XLogLongPageHeaderData: an insert position this far into a segment has written nothing in it yet. */
export const LONG_PAGE_HEADER_BYTES = 40;
const SEGMENTS_PER_XLOGID = 0x1_0000_0000 / WAL_SEGMENT_BYTES;

const SEGMENT_RE = /^([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{8})$/;
/** What basic_archive leaves in a spool: segments, `.partial` and `.backup` files, timeline `.history` files. */
const ARCHIVED_RE = /^(?:[0-9A-F]{24}(?:\.partial|\.[0-9A-F]{8}\.backup)?|[0-9A-F]{8}\.history)$/;

/** Whether `name` is a file the server archived (not basic_archive's `archtemp.*` temp files, not ours). */
export const isArchivedName = (name: string) => ARCHIVED_RE.test(name);

/** A WAL segment file name ("000000010000000000000003") as timeline and segment number; undefined for other names. */
export function parseSegmentName(name: string): { timeline: number; segno: number } | undefined {
  const m = SEGMENT_RE.exec(name);
  if (!m) return undefined;
  return { timeline: Number.parseInt(m[1]!, 16), segno: Number.parseInt(m[2]!, 16) * SEGMENTS_PER_XLOGID + Number.parseInt(m[3]!, 16) };
}

/** The segment a `.backup`/`.partial` file or segment name belongs to (its first 24 characters). */
export function segnoOfWalFile(name: string): number | undefined {
  return parseSegmentName(name.slice(0, 24))?.segno;
}

/** "16/B374D848" → bytes. */
export function parseLsn(lsn: string): bigint {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn.trim());
  if (!m) throw new Error(`not an LSN: ${JSON.stringify(lsn)}`);
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

export function segnoOfLsn(lsn: bigint): number {
  return Number(lsn / BigInt(WAL_SEGMENT_BYTES));
}

/**
 * The last segment a restore must replay to reach `lsn`: the one holding the
 * byte before it. A position just past a segment's long page header (where
 * the insert position rests after a segment switch) needs nothing of that
 * segment, so it counts as the end of the previous one.
 */
export function lastSegmentNeeded(lsn: bigint): number {
  const seg = BigInt(WAL_SEGMENT_BYTES);
  const offset = lsn % seg;
  return offset <= BigInt(LONG_PAGE_HEADER_BYTES) ? Number(lsn / seg) - 1 : Number(lsn / seg);
}
