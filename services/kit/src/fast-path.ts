import { ConfigError } from "./config.ts";

/**
 * The one switch between our fast path for internal unary calls and
 * connect-node's stock path: `INTERNAL_RPC_FAST_PATH` unset or `1` serves
 * binary Connect unary calls from unary-server.ts and sends them through
 * unary-transport.ts; `0` leaves servers and clients alike to connect-node.
 * The fast path builds on connect's protocol exports, which follow no semver
 * (hence the exact pin of @connectrpc/*); this is the way back without a code
 * change if an upgrade breaks it.
 */
export function internalRpcFastPath(env: Record<string, string | undefined> = process.env): boolean {
  const value = env.INTERNAL_RPC_FAST_PATH;
  if (value === undefined || value === "" || value === "1") return true;
  if (value === "0") return false;
  throw new ConfigError(`environment variable INTERNAL_RPC_FAST_PATH must be 0 or 1, got "${value}"`);
}
