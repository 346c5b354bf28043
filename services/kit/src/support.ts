import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { DescService } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { createInternalClient } from "./client.ts";
import { localStackLayout } from "./local-stack.ts";

/**
 * The internal secret for operator tools (support CLIs): INTERNAL_AUTH_SECRET,
 * else the one the local stack keeps in `$DBAAS_DATA_DIR/internal-auth-secret`.
 */
export function operatorSecret(env: Record<string, string | undefined> = process.env): string {
  if (env.INTERNAL_AUTH_SECRET) return env.INTERNAL_AUTH_SECRET;
  const file = join(localStackLayout(env).dataDir, "internal-auth-secret");
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    throw new Error(`set INTERNAL_AUTH_SECRET (or run next to a local stack: ${file} not found)`);
  }
}

/**
 * An internal client for an operator tool, calling as "support" with
 * operatorSecret(); without a secret the tool stops with its reason (exit 2, a usage error).
 */
export function operatorClient<S extends DescService>(service: S, url: string): Client<S> {
  let secret: string;
  try {
    secret = operatorSecret();
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  return createInternalClient(service, url, { secret, caller: "support" });
}
