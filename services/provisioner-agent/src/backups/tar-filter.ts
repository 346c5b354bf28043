/**
 * Drops named members from a tar stream on its way through, without holding
 * more than a header: a base backup leaves the server's private key
 * (`server.key`) behind, since a restore or a replica gets a certificate of
 * its own (process-control.ts issues one at its first start).
 *
 * BASE_BACKUP writes plain ustar (names up to 99 bytes, no extended headers);
 * GNU long-name ('L', 'K') and pax ('x') headers are understood anyway, so a
 * member named by one is matched by its real name and dropped with it.
 */
import { Transform, type TransformCallback } from "node:stream";

const BLOCK = 512;

const cstring = (b: Buffer) => {
  const end = b.indexOf(0);
  return b.subarray(0, end === -1 ? b.length : end).toString("utf8");
};

/** A header's size field: octal, or base-256 (high bit set) for members over 8 GiB. */
function memberSize(header: Buffer): number {
  const field = header.subarray(124, 136);
  if ((field[0]! & 0x80) !== 0) {
    let n = 0;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i]!;
    return n;
  }
  const text = cstring(field).trim();
  if (!/^[0-7]*$/.test(text)) throw new Error(`tar header of ${JSON.stringify(cstring(header.subarray(0, 100)))} has a bad size field`);
  return text === "" ? 0 : Number.parseInt(text, 8);
}

const padded = (n: number) => Math.ceil(n / BLOCK) * BLOCK;

/** The path a pax header's records give (`<len> path=<value>\n`), if any. */
function paxPath(data: Buffer): string | undefined {
  const text = data.toString("utf8");
  const m = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(text);
  return m?.[1];
}

const normalize = (name: string) => name.replace(/^(\.\/)+/, "");

/** A stream that copies a tar archive minus the members whose path (without a leading `./`) is in `names`. */
export function tarWithout(names: readonly string[]): Transform {
  const drop = new Set(names.map(normalize));
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  /** Extended headers (with their data) waiting for the member they describe. */
  let extended: Buffer[] = [];
  let longName: string | undefined;
  /** Bytes of the current member's data (padded) still to pass or skip. */
  let remaining = 0;
  let skipping = false;
  /** Collecting an extended header's data. */
  let collecting: { type: string; need: number; size: number } | undefined;
  /** After the end-of-archive blocks everything passes as it is. */
  let ended = false;

  const takeAll = (): Buffer => {
    const b = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    return b;
  };

  function step(out: Transform): void {
    for (;;) {
      if (ended) {
        if (pendingBytes > 0) out.push(takeAll());
        return;
      }
      if (remaining > 0) {
        if (pendingBytes === 0) return;
        const all = takeAll();
        const n = Math.min(remaining, all.length);
        if (!skipping) out.push(all.subarray(0, n));
        remaining -= n;
        if (n < all.length) {
          pending = [all.subarray(n)];
          pendingBytes = all.length - n;
        }
        continue;
      }
      const need = collecting ? collecting.need : BLOCK;
      if (pendingBytes < need) return;
      const all = takeAll();
      const block = all.subarray(0, need);
      if (all.length > need) {
        pending = [all.subarray(need)];
        pendingBytes = all.length - need;
      }
      if (collecting) {
        extended.push(block);
        const data = block.subarray(0, collecting.size);
        if (collecting.type === "L") longName = cstring(data);
        else if (collecting.type === "x") longName = paxPath(data) ?? longName;
        collecting = undefined;
        continue;
      }
      if (block.every((b) => b === 0)) {
        // End of archive (two zero blocks): nothing more is a member.
        if (extended.length > 0) for (const e of extended) out.push(e);
        extended = [];
        out.push(block);
        ended = true;
        continue;
      }
      const type = String.fromCharCode(block[156]!);
      const size = memberSize(block);
      if (type === "L" || type === "K" || type === "x") {
        extended.push(block);
        if (size > 1024 * 1024) throw new Error(`tar extended header of ${size} bytes`);
        collecting = { type, need: padded(size), size };
        continue;
      }
      const prefix = cstring(block.subarray(345, 500));
      const name = longName ?? (prefix ? `${prefix}/${cstring(block.subarray(0, 100))}` : cstring(block.subarray(0, 100)));
      skipping = drop.has(normalize(name));
      if (!skipping) {
        for (const e of extended) out.push(e);
        out.push(block);
      }
      extended = [];
      longName = undefined;
      // Links and directories carry no data whatever their size field says.
      remaining = type === "1" || type === "2" || type === "5" ? 0 : padded(size);
    }
  }

  return new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      pending.push(chunk);
      pendingBytes += chunk.length;
      try {
        step(this);
        cb();
      } catch (err) {
        cb(err as Error);
      }
    },
    flush(cb: TransformCallback) {
      if (remaining > 0 || collecting || (!ended && pendingBytes > 0)) return cb(new Error("tar archive ends inside a member"));
      cb();
    },
  });
}
