import { isTierName, TIER_NAMES } from "@dbaas/catalogue";
import { INSTANCE_ID_RE } from "../instance-access.ts";
import type { InstanceSettings } from "../runtime.ts";
import { checkHostname } from "./tls.ts";

/** Ids become path components and must not contain the `.` our leftovers use as a separator. */
export const ID_RE = INSTANCE_ID_RE;
const B64 = "[A-Za-z0-9+/]+={0,2}";
const VERIFIER_RE = new RegExp(`^SCRAM-SHA-256\\$(\\d+):(${B64})\\$(${B64}):(${B64})$`);

export function assertId(id: string): void {
  if (!ID_RE.test(id)) throw new Error(`invalid instance id ${JSON.stringify(id)}: use 1-63 of [A-Za-z0-9_-], starting alphanumeric`);
}

/**
 * PostgreSQL stores a well-formed verifier as-is but silently hashes anything
 * else as a plaintext password, so a malformed value must never reach it.
 */
export function assertVerifier(v: string): void {
  const m = VERIFIER_RE.exec(v);
  const ok =
    !!m &&
    Number(m[1]) > 0 &&
    Buffer.from(m[2]!, "base64").length > 0 &&
    Buffer.from(m[3]!, "base64").length === 32 &&
    Buffer.from(m[4]!, "base64").length === 32;
  if (!ok) throw new Error("scramVerifier must be SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey> (base64, 32-byte keys)");
}

export function assertSettings(o: InstanceSettings): void {
  if (!Number.isInteger(o.port) || o.port < 1024 || o.port > 65535) throw new Error(`invalid port ${o.port}: must be 1024-65535`);
  if (!isTierName(o.tier)) throw new Error(`unknown tier ${JSON.stringify(o.tier)}; expected one of ${TIER_NAMES.join(", ")}`);
  checkHostname(o.hostname);
  assertVerifier(o.scramVerifier);
}

/**
 * synchronous_standby_names as the databases service sends it: empty, or
 * `ANY n ("id", …)` of standby ids; nothing else reaches a configuration file.
 */
export function assertSynchronousStandbyNames(names: string): void {
  if (names === "") return;
  if (!/^ANY [1-9] \("[a-z0-9][a-z0-9-]{0,62}"(, "[a-z0-9][a-z0-9-]{0,62}")*\)$/.test(names)) {
    throw new Error(`invalid synchronous_standby_names ${JSON.stringify(names)}: expected ANY n ("standby-id", …)`);
  }
}
