import pg from "pg";

/** Superuser the agent uses over the unix socket; never reachable over TCP. */
export const AGENT_SUPERUSER = "dbaas_agent";
/** The customer's role: may create databases and roles, is not superuser. */
export const ADMIN_ROLE = "dbadmin";
/** Database created for the customer in every instance. */
export const DEFAULT_DATABASE = "defaultdb";

/** One short session as the agent's superuser over an instance's unix socket. */
export async function withAgentClient<T>(sock: string, port: number, fn: (c: pg.Client) => Promise<T>, timeoutMs = 5000): Promise<T> {
  const client = new pg.Client({
    host: sock,
    port,
    user: AGENT_SUPERUSER,
    database: "postgres",
    ssl: false,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs * 2,
    application_name: "dbaas-agent",
  });
  // Without a listener a server-side disconnect would crash the agent.
  client.on("error", () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}
