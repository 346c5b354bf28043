import net from "node:net";

/*
 * Trusted sources' address ranges (docs/product.md, Trusted sources and connection pooling):
 * IPv4 or IPv6, one address (taken as /32 or /128) or a network in CIDR form, normalized to the
 * network form PostgreSQL's `cidr` type and nftables agree on. A range with host bits set is
 * refused with the network it most likely meant, never silently widened or narrowed.
 */

export type CidrResult = { ok: true; cidr: string; family: 4 | 6 } | { ok: false; message: string };

const PREFIX_RE = /^(0|[1-9][0-9]{0,2})$/;

function v4ToBig(addr: string): bigint {
  return addr.split(".").reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n);
}

function bigToV4(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join(".");
}

/** The 128-bit value of an IPv6 literal (with an embedded IPv4 tail where written so). */
function v6ToBig(addr: string): bigint {
  let text = addr;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const v4 = v4ToBig(tail[1]!);
    text = `${text.slice(0, -tail[1]!.length)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const groups = rest === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  return groups.reduce((n, g) => (n << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
}

/** RFC 5952 text of a 128-bit address: lowercase, leading zeros dropped, the longest run of two or more zero groups as `::`. */
export function bigToV6(n: bigint): string {
  const groups = Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - i * 16)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(":");
  return `${hex.slice(0, best).join(":")}::${hex.slice(best + bestLen).join(":")}`;
}

/** `input` as a normalized CIDR, or why it is not one (a message for the `cidr` field's 422). */
export function parseCidr(input: string): CidrResult {
  const text = input.trim();
  if (text === "") return { ok: false, message: "is required: an IPv4 or IPv6 address or network, e.g. 203.0.113.0/24 or 2001:db8::/32" };
  const slash = text.indexOf("/");
  const addr = slash < 0 ? text : text.slice(0, slash);
  const prefixText = slash < 0 ? undefined : text.slice(slash + 1);
  const family = net.isIPv4(addr) ? 4 : net.isIPv6(addr) && !addr.includes("%") ? 6 : 0;
  if (family === 0) {
    return { ok: false, message: `"${text}" is not an IPv4 or IPv6 address or network (e.g. 203.0.113.0/24, 198.51.100.7, 2001:db8::/32)` };
  }
  const bits = family === 4 ? 32 : 128;
  if (prefixText !== undefined && !PREFIX_RE.test(prefixText)) {
    return { ok: false, message: `"${text}" has no valid prefix length: after the "/" comes a number from 0 to ${bits}` };
  }
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return { ok: false, message: `"${text}": an IPv${family} prefix length is at most ${bits}` };
  const value = family === 4 ? v4ToBig(addr) : v6ToBig(addr);
  const hostMask = (1n << BigInt(bits - prefix)) - 1n;
  const network = value & ~hostMask & ((1n << BigInt(bits)) - 1n);
  const show = (n: bigint) => (family === 4 ? bigToV4(n) : bigToV6(n));
  if ((value & hostMask) !== 0n) {
    const meant = `${show(network)}/${prefix}`;
    const single = `${show(value)}/${bits}`;
    return {
      ok: false,
      message: `"${text}" has host bits set: did you mean ${meant} (the whole network) or ${single} (this address alone)?`,
    };
  }
  return { ok: true, cidr: `${show(network)}/${prefix}`, family };
}
