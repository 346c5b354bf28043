import { randomToken, scramVerifier } from "@dbaas/kit";

// Letters and digits only: the password goes into a URL without escaping.
const PASSWORD_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";

/** A new database password: 32 characters from a 56-letter alphabet (~186 bits). */
export function generatePassword(): string {
  return randomToken(32, PASSWORD_ALPHABET);
}

/**
 * The SCRAM iteration count of the verifiers of the passwords we generate (GENERATED_PASSWORD_SCRAM_ITERATIONS,
 * default 1). PBKDF2's iterations make each guess of a stolen verifier or a sniffed exchange dearer: 4,096 of them
 * add 12 bits to a password's strength, which matters for a password a person chose and not for one of ~186 random
 * bits (a 2^185-guess search either way). What they do cost is every client's CPU on every new connection — ~7 ms
 * of libpq's time here, most of a pooled connection's cost (docs/benchmarks.md, the pooler's `-C`). Neon made the
 * same choice for the same reason. A password a customer sets inside the database (ALTER ROLE … PASSWORD) is hashed
 * by PostgreSQL with its own 4,096. docs/decisions.md, "SCRAM iterations of generated passwords".
 */
export const DEFAULT_GENERATED_PASSWORD_ITERATIONS = 1;

/** A generated password and the SCRAM verifier the agent gets for it (the password itself is never stored). */
export function newCredentials(iterations: number): { password: string; verifier: string } {
  const password = generatePassword();
  return { password, verifier: scramVerifier(password, { iterations }) };
}
