import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { randomToken } from "@dbaas/kit";

// Letters and digits only: the password goes into a URL without escaping.
const PASSWORD_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";

/** A new database password: 32 characters from a 56-letter alphabet (~186 bits). */
export function generatePassword(): string {
  return randomToken(32, PASSWORD_ALPHABET);
}

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for a password (RFC 5802/7677,
 * PostgreSQL's `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>` format).
 * Handing the agent this instead of the password means the control plane
 * never holds a password.
 */
export function scramVerifier(password: string, iterations = 4096, salt = randomBytes(16)): string {
  const salted = pbkdf2Sync(password.normalize("NFKC"), salt, iterations, 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}
