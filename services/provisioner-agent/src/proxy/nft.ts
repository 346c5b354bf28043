import { execFile, execFileSync } from "node:child_process";

/*
 * Runs the nft CLI without a shell: scripts go to `nft -f -` on stdin (one
 * script is one kernel transaction, applied whole or not at all), arguments
 * as an argv array. Strings that end up in a script are checked by
 * `nftString` or `nftName` first: nft has no escape for a double quote inside a quoted
 * string, so anything outside a plain character set is refused, not escaped.
 *
 * NFT_PATH names the binary (default `nft`, looked up in PATH). An agent that
 * is not root uses nft through a copy with the file capability cap_net_admin
 * (`setcap cap_net_admin+ep`), as the container image ships it: the kernel
 * grants the capability to that program only, and only where the process may
 * gain it (NET_ADMIN in its bounding set, no_new_privs off).
 */

/** The nft binary: NFT_PATH, read on every call (tests point a child process at a copy). */
const nft = () => process.env.NFT_PATH || "nft";

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

/** Applies `script` as one transaction. */
export function nftApply(script: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(nft(), ["-f", "-"], { timeout: 30_000 }, (e) => (e ? reject(failure(["-f", "-"], e)) : resolve()));
    child.stdin!.end(script);
  });
}

/** `nftApply` for the agent's start, before anything else runs. */
export function nftApplySync(script: string): void {
  try {
    execFileSync(nft(), ["-f", "-"], { input: script, stdio: ["pipe", "ignore", "pipe"], timeout: 30_000 });
  } catch (e) {
    throw failure(["-f", "-"], e);
  }
}

/** nft's text output of `args`. */
export function nftText(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(nft(), args, { timeout: 30_000, maxBuffer: 64 << 20 }, (e, stdout) => (e ? reject(failure(args, e)) : resolve(stdout)));
  });
}

/**
 * The objects of `nft -j <args>` (metainfo left out). Packet and byte counts
 * stay exact: they are turned into strings before parsing, as JSON numbers
 * beyond 2^53 would be rounded.
 */
export async function nftJson(args: string[]): Promise<Record<string, unknown>[]> {
  const text = await nftText(["-j", ...args]);
  const parsed = JSON.parse(text.replace(/"(bytes|packets)": (\d+)/g, '"$1": "$2"')) as { nftables?: Record<string, unknown>[] };
  return (parsed.nftables ?? []).filter((o) => !("metainfo" in o));
}
