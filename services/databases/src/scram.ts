import { randomToken } from "@dbaas/kit";

// Letters and digits only: the password goes into a URL without escaping.
const PASSWORD_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";

/** A new database password: 32 characters from a 56-letter alphabet (~186 bits). */
export function generatePassword(): string {
  return randomToken(32, PASSWORD_ALPHABET);
}
