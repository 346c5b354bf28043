import { nftName } from "./nft.ts";
import { ipv4Networks } from "./trust.ts";

/*
 * Trusted sources in the nftables meter (nft-meter.ts's table): before a new connection to a
 * published port reaches its server, the kernel checks the client's address against the
 * database's own set and resets the connection when it is not in it.
 *
 *   trust_ports   published port → jump trust_<db>, only for databases with trusted sources (a
 *                 port absent from it admits everyone); a pooler's port jumps to its database's.
 *   trust_in      filter input hook, before the counters: new, DNAT'd connections only
 *                 (`ct state new ct status dnat`), looked up by their original destination port.
 *   trust4_<db>   the database's IPv4 networks (an interval set); chain trust_<db> accepts those
 *                 and resets the rest.
 *
 * The table is IPv4 (the meter DNATs IPv4 only): a database's IPv6 entries admit nobody here
 * and are the userspace proxy's to check. Every change rewrites all of this in one transaction
 * (`trustScript`): the kernel switches from the old rules to the new ones at once, with nothing
 * admitted in between, and the same script puts back whatever was changed behind the agent's back.
 */

const chainOf = (db: string) => nftName(`trust_${db}`);
const setOf = (db: string) => nftName(`trust4_${db}`);

/** The declarations inside the meter's `table … { }` block. */
export const TRUST_DECLARATIONS = [
  "  map trust_ports { type inet_service : verdict; }",
  "  chain trust_in { type filter hook input priority -10; }",
];

/** The hook's one rule, written anew (a repair puts it back too). */
export function trustHookLines(t: string): string[] {
  return [
    `flush chain ${t} trust_in`,
    `add rule ${t} trust_in meta l4proto tcp ct state new ct status dnat ct direction original ct original proto-dst vmap @trust_ports`,
  ];
}

/**
 * The whole trusted-source state of table `t` (`ip <name>`): `lists` (database → CIDRs, non-empty
 * ones only), `ports` (published port → the database whose list applies), and the databases whose
 * objects are to go (`gone`: they may or may not exist; `add` then `delete` removes either way).
 */
export function trustScript(
  t: string,
  lists: ReadonlyMap<string, readonly string[]>,
  ports: ReadonlyMap<number, string>,
  gone: Iterable<string>,
): string[] {
  const lines = [
    `flush chain ${t} trust_in`,
    `add rule ${t} trust_in meta l4proto tcp ct state new ct status dnat ct direction original ct original proto-dst vmap @trust_ports`,
    `flush map ${t} trust_ports`,
  ];
  for (const [db, cidrs] of lists) {
    const nets = ipv4Networks(cidrs);
    lines.push(
      `add set ${t} ${setOf(db)} { type ipv4_addr; flags interval; }`,
      `flush set ${t} ${setOf(db)}`,
      ...(nets.length > 0 ? [`add element ${t} ${setOf(db)} { ${nets.join(", ")} }`] : []),
      `add chain ${t} ${chainOf(db)}`,
      `flush chain ${t} ${chainOf(db)}`,
      `add rule ${t} ${chainOf(db)} ip saddr @${setOf(db)} accept`,
      `add rule ${t} ${chainOf(db)} reject with tcp reset`,
    );
  }
  const elements = [...ports].filter(([, db]) => lists.has(db)).map(([port, db]) => `${port} : jump ${chainOf(db)}`);
  if (elements.length > 0) lines.push(`add element ${t} trust_ports { ${elements.join(", ")} }`);
  for (const db of gone) {
    if (lists.has(db)) continue;
    lines.push(
      `add chain ${t} ${chainOf(db)}`,
      `delete chain ${t} ${chainOf(db)}`,
      `add set ${t} ${setOf(db)} { type ipv4_addr; flags interval; }`,
      `delete set ${t} ${setOf(db)}`,
    );
  }
  return lines;
}

/**
 * A database whose chain exists but whose set holds nothing had IPv6 entries only: it admits no IPv4
 * client. Taken back as this address, which no client has, so the list stays non-empty.
 */
const NOBODY = "::/128";

/**
 * The databases with trust objects in a table listing (`nft -j list table`), and the lists their
 * sets hold: what a previous agent process enforced, kept until this one is told its own (a port
 * served again after a restart is never open in between).
 */
export function trustStateIn(objects: readonly Record<string, unknown>[]): { objects: Set<string>; lists: Map<string, string[]> } {
  const found = new Set<string>();
  const chains = new Set<string>();
  const lists = new Map<string, string[]>();
  for (const o of objects) {
    const chain = o.chain as { name: string } | undefined;
    if (chain?.name.startsWith("trust_") && chain.name !== "trust_in") {
      found.add(chain.name.slice("trust_".length));
      chains.add(chain.name.slice("trust_".length));
    }
    const set = o.set as { name: string; elem?: unknown[] } | undefined;
    if (set?.name.startsWith("trust4_")) {
      const db = set.name.slice("trust4_".length);
      found.add(db);
      const cidrs: string[] = [];
      for (const e of set.elem ?? []) {
        if (typeof e === "string") cidrs.push(`${e}/32`);
        const prefix = (e as { prefix?: { addr: string; len: number } }).prefix;
        if (prefix) cidrs.push(`${prefix.addr}/${prefix.len}`);
      }
      lists.set(db, cidrs);
    }
  }
  for (const db of chains) if ((lists.get(db) ?? []).length === 0) lists.set(db, [NOBODY]);
  return { objects: found, lists };
}
