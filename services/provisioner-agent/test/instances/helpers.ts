import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";

/**
 * The verifier PostgreSQL stores for a SCRAM-SHA-256 password (RFC 5802/7677),
 * computed client-side so the agent never sees the plaintext.
 */
export { scramVerifier } from "@dbaas/kit";

/** A TCP port that was free a moment ago (bind port 0, read it, release it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Fresh data directory per test file. */
export function tempDataDir(tag: string): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), `dbaas-it-${tag}-`));
}

export function randomPassword(): string {
  return randomBytes(18).toString("base64url");
}
