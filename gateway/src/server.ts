import { createServer, type Server } from "node:http";
import type { Express } from "express";
import type { GatewayContext } from "./context.ts";
import { createMalformedAnswers, MAX_HEADER_BYTES } from "./http-errors.ts";

/**
 * The gateway's HTTP server around the app: what Node would answer by itself
 * (unparseable requests, headers over 16 KB, no Host, an unknown Expect,
 * CONNECT) gets the error envelope and the standard headers instead
 * (http-errors.ts). `main.ts` listens on it; tests mount it on port 0.
 */
export function createGatewayServer(ctx: GatewayContext, app: Express): Server {
  const malformed = createMalformedAnswers(ctx);
  // Host is checked by hostMissing, which answers in the envelope rather than Node's bare 400.
  const server = createServer({ requireHostHeader: false, maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    if (!malformed.hostMissing(req, res)) app(req, res);
  });
  // A client may half-close once its request is sent (RFC 9112: a half-closed connection is no loss of
  // interest in the answer); by default Node then ends the socket at once and an answer still being worked
  // on is lost. Here the socket ends after that answer instead.
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  server.on("clientError", malformed.clientError);
  server.on("checkExpectation", malformed.checkExpectation);
  server.on("connect", malformed.connect);
  return server;
}
