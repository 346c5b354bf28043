import { execFile, execFileSync } from "node:child_process";

/*
 * Runs the nft CLI without a shell: scripts go to `nft -f -` on stdin (one
 * script is one kernel transaction, applied whole or not at all), arguments
 * as an argv array. Strings that end up in a script are checked by
 * `nftString` or `nftName` first: nft has no escape for a double quote inside a quoted
 * string, so anything outside a plain character set is refused, not escaped.
 *
 * The binary is the agent's NFT_PATH setting (default `nft`, looked up in PATH). An agent that
 * is not root uses nft through a copy with the file capability cap_net_admin
 * (`setcap cap_net_admin+ep`), as the container image ships it: the kernel
 * grants the capability to that program only, and only where the process may
 * gain it (NET_ADMIN in its bounding set, no_new_privs off).
 */

/** A double-quoted nft string of `s`; throws if `s` holds characters nft could not take literally. */
export function nftString(s: string): string {
  if (!/^[A-Za-z0-9_.,/@:+=~ -]*$/.test(s)) throw new Error(`${JSON.stringify(s)} cannot be written into an nft rule set safely`);
  return `"${s}"`;
}

/** `s` as an nft object name (names cannot be quoted where objects are declared); throws unless it is a plain identifier. */
export function nftName(s: string): string {
  if (!/^[A-Za-z][A-Za-z0-9_-]{0,127}$/.test(s)) throw new Error(`${JSON.stringify(s)} is not a usable nft object name`);
  return s;
}

function failure(args: string[], e: unknown): Error {
  const err = e as { stderr?: string | Buffer; message: string };
  const detail = String(err.stderr ?? "").trim() || err.message;
  return new Error(`nft ${args.join(" ")}: ${detail}`);
}

/** The nft CLI at `binary`. */
export interface Nft {
  /** Applies `script` as one transaction. */
  apply(script: string): Promise<void>;
  /** `apply` for the agent's start, before anything else runs. */
  applySync(script: string): void;
  /** nft's text output of `args`. */
  text(args: string[]): Promise<string>;
  /**
   * The objects of `nft -j <args>` (metainfo left out). Packet and byte counts
   * stay exact: they are turned into strings before parsing, as JSON numbers
   * beyond 2^53 would be rounded.
   */
  json(args: string[]): Promise<Record<string, unknown>[]>;
}

export function nftCommand(binary = "nft"): Nft {
  const text = (args: string[]) =>
    new Promise<string>((resolve, reject) => {
      execFile(binary, args, { timeout: 30_000, maxBuffer: 64 << 20 }, (e, stdout) => (e ? reject(failure(args, e)) : resolve(stdout)));
    });
  return {
    apply: (script) =>
      new Promise((resolve, reject) => {
        const child = execFile(binary, ["-f", "-"], { timeout: 30_000 }, (e) => (e ? reject(failure(["-f", "-"], e)) : resolve()));
        child.stdin!.end(script);
      }),
    applySync(script) {
      try {
        execFileSync(binary, ["-f", "-"], { input: script, stdio: ["pipe", "ignore", "pipe"], timeout: 30_000 });
      } catch (e) {
        throw failure(["-f", "-"], e);
      }
    },
    text,
    async json(args) {
      const out = await text(["-j", ...args]);
      const parsed = JSON.parse(out.replace(/"(bytes|packets)": (\d+)/g, '"$1": "$2"')) as { nftables?: Record<string, unknown>[] };
      return (parsed.nftables ?? []).filter((o) => !("metainfo" in o));
    },
  };
}
