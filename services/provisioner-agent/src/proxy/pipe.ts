import type net from "node:net";

/** Where a chunk is counted before it is forwarded; throwing refuses it (and ends the connection). */
export interface ChunkCounter {
  addIn(n: number): void;
  addOut(n: number): void;
}

/**
 * Forwards bytes between a client and the database, both ways, untouched
 * (TLS included: the proxy sees only ciphertext). Each chunk is counted
 * before it is written on. A side that cannot keep up pauses the other
 * (backpressure); an end (FIN) from one side is passed on while the other
 * direction keeps flowing (half-close); an error on either side ends both.
 */
export function pipeCounted(client: net.Socket, upstream: net.Socket, counter: ChunkCounter): void {
  const fail = () => {
    client.destroy();
    upstream.destroy();
  };
  const forward = (from: net.Socket, to: net.Socket, count: (n: number) => void) => {
    from.on("data", (chunk: Buffer) => {
      try {
        count(chunk.length);
      } catch {
        fail();
        return;
      }
      if (!to.write(chunk)) {
        from.pause();
        to.once("drain", () => from.resume());
      }
    });
    from.on("end", () => to.end());
    from.on("error", fail);
    // A close before both halves were done (a destroy, a reset): nothing more can flow either way.
    from.on("close", () => {
      if (!(from.readableEnded && from.writableFinished)) fail();
    });
  };
  forward(client, upstream, (n) => counter.addIn(n));
  forward(upstream, client, (n) => counter.addOut(n));
}
