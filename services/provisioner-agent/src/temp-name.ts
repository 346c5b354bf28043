import { randomBytes } from "node:crypto";

/** Suffix of temp names (`<name>.tmp-<hex>`, `<dir>.purging-<hex>`); leftovers are recognised by it. */
export function rand(): string {
  return randomBytes(4).toString("hex");
}
