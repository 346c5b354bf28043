import net from "node:net";
import pg from "pg";

/**
 * A customer's session from a chosen source address (a loopback address like 127.0.0.5: the
 * local stack's agent publishes on 127.0.0.1, and a client may bind any 127.0.0.x), as
 * `connectCustomer` makes it otherwise: TLS, the host name as server name (verify-full with `ca`).
 */
export async function connectFrom(source: string, connectionString: string, ca?: string, timeoutMs = 5000): Promise<pg.Client> {
  const url = new URL(connectionString);
  const client = new pg.Client({
    host: "127.0.0.1",
    port: Number(url.port),
    user: url.username,
    password: decodeURIComponent(url.password),
    database: url.pathname.slice(1),
    ssl: ca ? { ca, servername: url.hostname } : { rejectUnauthorized: false },
    connectionTimeoutMillis: timeoutMs,
    stream: () => {
      const socket = new net.Socket();
      const connect = socket.connect.bind(socket) as (o: net.TcpSocketConnectOpts) => net.Socket;
      // pg calls connect(port, host): the same, from `source`.
      (socket as unknown as { connect: (port: number, host: string) => net.Socket }).connect = (port, host) =>
        connect({ port, host, localAddress: source });
      return socket;
    },
  });
  await client.connect();
  return client;
}

/** "ok" when a session from `source` runs `SELECT 1`, else why not (the error's code or message). */
export async function attempt(source: string, connectionString: string, ca?: string): Promise<string> {
  let client: pg.Client | undefined;
  try {
    client = await connectFrom(source, connectionString, ca);
    await client.query("SELECT 1");
    return "ok";
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return err.code ?? err.message;
  } finally {
    await client?.end().catch(() => {});
  }
}

/** Polls `attempt` once every 200 ms until it answers as `want` says, or fails after `timeoutMs`, naming the last answer. */
export async function untilAttempt(
  what: string,
  source: string,
  connectionString: string,
  want: (answer: string) => boolean,
  timeoutMs = 60_000,
  ca?: string,
): Promise<{ answer: string; ms: number }> {
  const t0 = Date.now();
  let answer = "";
  for (;;) {
    answer = await attempt(source, connectionString, ca);
    if (want(answer)) return { answer, ms: Date.now() - t0 };
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: still "${answer}" after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export const admitted = (a: string) => a === "ok";
/** Refused before the server: reset, refused, or closed during the handshake. */
export const refused = (a: string) => a !== "ok" && !/password|authentication/i.test(a);
