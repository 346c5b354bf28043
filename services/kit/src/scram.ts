import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for a password (RFC 5802/7677, PostgreSQL's
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` format, base64). Handing a server this instead of
 * the password means whoever computed it is the only one that ever held the password: the databases service for
 * customers' roles, the agent for its replication role. 4,096 iterations, PostgreSQL's default (what every client
 * pays per login: docs/benchmarks.md, the pooler's `-C`); a fresh 16-byte salt unless one is given (to check a
 * stored verifier, `verifiesScram`). The password is NFKC-normalized, as SASLprep would for the ASCII and common
 * Unicode passwords we generate and accept.
 */
export function scramVerifier(password: string, o: { iterations?: number; salt?: Buffer } = {}): string {
  const iterations = o.iterations ?? 4096;
  const salt = o.salt ?? randomBytes(16);
  const salted = pbkdf2Sync(password.normalize("NFKC"), salt, iterations, 32, "sha256");
  const storedKey = createHash("sha256").update(createHmac("sha256", salted).update("Client Key").digest()).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}

/** Whether the stored verifier `stored` is one of `password` (recomputed with its own salt and iteration count). */
export function verifiesScram(stored: string | null | undefined, password: string): boolean {
  const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(stored ?? "");
  return !!m && scramVerifier(password, { iterations: Number(m[1]), salt: Buffer.from(m[2]!, "base64") }) === stored;
}
