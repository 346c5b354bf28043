import http from "node:http";
import type http2 from "node:http2";
import net from "node:net";

/** What every HTTP/2 connection without TLS begins with (RFC 9113 §3.4); no HTTP/1 method is `PRI`. */
const PREFACE = Buffer.from("PRI ", "latin1");

export interface CleartextListener {
  server: net.Server;
  /** Stops listening and cuts the HTTP/1.1 connections (scrapes and probes: nothing to finish); HTTP/2 is the caller's. */
  close(done: () => void): void;
}

/**
 * One port for both protocols: connections that open with the HTTP/2
 * preface go to `h2` (prior knowledge, as every Connect and gRPC client
 * here speaks), any other to an HTTP/1.1 server answering `plain` — only
 * GET /healthz and /metrics, which load balancers, container probes and
 * Prometheus ask over HTTP/1.1 (none of them speaks cleartext HTTP/2). The
 * first bytes are read, put back, and the socket handed over; the HTTP/2
 * session then reads it natively as before.
 */
export function listenCleartext(h2: http2.Http2Server, plain: http.RequestListener): CleartextListener {
  const h1 = http.createServer(plain);
  // Every socket not handed to HTTP/2: still silent, or HTTP/1.1.
  const loose = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    loose.add(socket);
    socket.once("close", () => loose.delete(socket));
    // Until it is handed over, an error (a reset) is this listener's to swallow.
    const onError = () => socket.destroy();
    socket.on("error", onError);
    let head: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const n = Math.min(head.length, PREFACE.length);
      if (head.length < PREFACE.length && head.subarray(0, n).equals(PREFACE.subarray(0, n))) return;
      socket.off("data", onData);
      socket.off("error", onError);
      socket.pause();
      socket.unshift(head);
      if (head.subarray(0, PREFACE.length).equals(PREFACE)) {
        loose.delete(socket);
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
  });
  return {
    server,
    close(done) {
      server.close(() => done());
      for (const s of loose) s.destroy();
    },
  };
}
