import net from "node:net";

/*
 * Trusted sources (docs/product.md, Trusted sources and connection pooling): the address ranges a
 * database admits on its published ports (its own and its pooler's). An empty list admits every
 * address. The databases service sends them normalized (network form, IPv4 or IPv6) with each
 * entry's expires_at; the agent drops an entry at that instant itself, so it stops admitting on
 * time whatever the control plane is doing.
 */

export interface TrustedEntry {
  /** Network form: `203.0.113.0/24`, `2001:db8::/32`. */
  cidr: string;
  /** Unset: permanent. */
  expiresAt?: Date;
}

/** The CIDRs of `entries` that admit at `now`, and the next instant that changes (an entry's expiry). */
export function admittedAt(entries: readonly TrustedEntry[], now: Date): { cidrs: string[]; nextChange?: Date } {
  const cidrs: string[] = [];
  let nextChange: Date | undefined;
  for (const e of entries) {
    if (e.expiresAt && e.expiresAt.getTime() <= now.getTime()) continue;
    if (!isCidr(e.cidr)) continue;
    cidrs.push(e.cidr);
    if (e.expiresAt && (!nextChange || e.expiresAt < nextChange)) nextChange = e.expiresAt;
  }
  return { cidrs: [...new Set(cidrs)].sort(), nextChange };
}

/** Whether `s` is an address/prefix of either family (what the meters can be given). */
export function isCidr(s: string): boolean {
  const [addr, prefix, more] = s.split("/");
  if (more !== undefined || addr === undefined || prefix === undefined || !/^[0-9]{1,3}$/.test(prefix)) return false;
  const family = net.isIPv4(addr) ? 4 : net.isIPv6(addr) ? 6 : 0;
  return family !== 0 && Number(prefix) <= (family === 4 ? 32 : 128);
}

/** A matcher for `cidrs` (empty: admits everyone). IPv4-mapped IPv6 clients (`::ffff:a.b.c.d`) count as IPv4. */
export function admitter(cidrs: readonly string[]): (address: string | undefined) => boolean {
  if (cidrs.length === 0) return () => true;
  const list = new net.BlockList();
  for (const c of cidrs) {
    const [a, p] = c.split("/") as [string, string];
    list.addSubnet(a, Number(p), net.isIPv4(a) ? "ipv4" : "ipv6");
  }
  return (address) => {
    if (!address) return false;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    const a = mapped ? mapped[1]! : address;
    const family = net.isIPv4(a) ? "ipv4" : net.isIPv6(a) ? "ipv6" : undefined;
    return family !== undefined && list.check(a, family);
  };
}

function v4Range(cidr: string): [number, number] {
  const [a, p] = cidr.split("/") as [string, string];
  const start = a.split(".").reduce((n, o) => n * 256 + Number(o), 0);
  return [start, start + 2 ** (32 - Number(p)) - 1];
}

/**
 * The IPv4 networks of `cidrs` with every network inside another left out: an nftables interval
 * set refuses overlapping elements, and CIDR blocks either nest or are disjoint.
 */
export function ipv4Networks(cidrs: readonly string[]): string[] {
  const v4 = cidrs.filter((c) => net.isIPv4(c.split("/")[0]!)).map((c) => ({ c, r: v4Range(c) }));
  return v4
    .filter(({ c, r }) => !v4.some((o) => o.c !== c && o.r[0] <= r[0] && o.r[1] >= r[1] && (o.r[0] !== r[0] || o.r[1] !== r[1])))
    .map(({ c }) => c);
}
