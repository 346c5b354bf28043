import pg from "pg";

/**
 * A client connected as the customer connects: credentials from a connection
 * string the API returned, TLS required, to 127.0.0.1 with the database's host
 * name as TLS server name (so `ca` gives verify-full semantics). The caller ends it.
 */
export async function connectCustomer(connectionString: string, ca?: string): Promise<pg.Client> {
  const url = new URL(connectionString);
  const client = new pg.Client({
    host: "127.0.0.1",
    port: Number(url.port),
    user: url.username,
    password: decodeURIComponent(url.password),
    database: url.pathname.slice(1),
    ssl: ca ? { ca, servername: url.hostname } : { rejectUnauthorized: false },
    connectionTimeoutMillis: 5000,
  });
  await client.connect();
  return client;
}

/** Runs `sql` on a client of its own (connectCustomer), ended afterwards. */
export async function query(connectionString: string, sql: string, ca?: string): Promise<any[]> {
  const client = await connectCustomer(connectionString, ca);
  // A session the server ends after answering (a password reset ends every session of the role, an agent's sweep
  // can reach this one between its answer and its end) arrives as an error event: the query's own failure is its
  // rejection; an end after it is nothing this caller waits for (a fresh-clone CI counted it as unhandled).
  client.on("error", () => {});
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}
