import type { Schemas } from "@dbaas/client";

type TrustedSource = Schemas["TrustedSource"];
type Pooler = Schemas["Pooler"];

/**
 * What a trusted source's CIDR admits, in words: one address (a /32 or /128) or a network and its size
 * (IPv4 counted; IPv6 by its prefix, the counts being astronomical).
 */
export function describeCidr(cidr: string): string {
  const [address = "", prefixText] = cidr.split("/");
  const v6 = address.includes(":");
  const bits = v6 ? 128 : 32;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > bits) return cidr;
  if (prefix === bits) return `one ${v6 ? "IPv6" : "IPv4"} address`;
  if (v6) return `IPv6 network (/${prefix})`;
  if (prefix === 0) return "every IPv4 address";
  return `IPv4 network, ${(2 ** (bits - prefix)).toLocaleString("en-US")} addresses`;
}

/** The `expires_at` to send from a `<input type="datetime-local">` value (the user's wall time): none when left empty. */
export function expiresAtFromInput(value: string): string | undefined {
  if (value.trim() === "") return undefined;
  const at = new Date(value);
  // An unreadable value is sent as typed, for the API to name the field.
  return Number.isNaN(at.getTime()) ? value : at.toISOString();
}

/** What removing an entry changes: the last one gone, every address is admitted again. */
export function removalNote(entries: readonly TrustedSource[], id: string): string {
  const entry = entries.find((e) => e.id === id);
  const what = entry ? entry.cidr : "This address";
  if (entries.length === 1 && entry) {
    return `${what} is the only trusted source: once it is removed the list is empty and every address can connect again.`;
  }
  return `${what} stops being admitted within 5 seconds, unless another entry covers it.`;
}

/** The pooler's state as a badge: `unavailable` where its host runs no PgBouncer (the API's `reason` says why). */
export function poolerState(p: Pooler): "enabled" | "disabled" | "unavailable" {
  if (p.reason !== undefined || p.host === undefined) return "unavailable";
  return p.enabled ? "enabled" : "disabled";
}

/** The pool size to send from its text field: a number as typed (the API bounds it by the tier), none when empty. */
export function poolSizeFromInput(text: string): number | undefined {
  const t = text.trim();
  return t === "" ? undefined : Number(t);
}
