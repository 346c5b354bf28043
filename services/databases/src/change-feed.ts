import { EventEmitter } from "node:events";
import pg from "pg";
import type { Logger } from "@dbaas/kit";

/** Channel names; payload is an agent id or a database id. */
export const AGENT_CHANNEL = "dbaas_agent_changed";
export const DATABASE_CHANNEL = "dbaas_database_observed";

/**
 * PostgreSQL LISTEN/NOTIFY fan-out, so every replica of the databases service
 * learns of changes committed by any other: desired state changed for an agent
 * (its watch stream re-sends), an agent report landed for a database (a
 * waiting reset-password resumes). Notifications are sent inside the writing
 * transaction, so they arrive only after commit.
 */
export interface ChangeFeed {
  onAgent(agentId: string, fn: () => void): () => void;
  onDatabase(databaseId: string, fn: () => void): () => void;
  close(): Promise<void>;
}

export async function createChangeFeed(databaseUrl: string, log: Logger): Promise<ChangeFeed> {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  let client: pg.Client | undefined;
  let closed = false;

  // Until it is back (the database may be restarting for a while), try again every second.
  const reconnect = () => {
    if (closed) return;
    setTimeout(() => void connect().catch(reconnect), 1000).unref();
  };
  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: databaseUrl });
    c.on("notification", (n) => emitter.emit(`${n.channel}:${n.payload}`));
    c.on("error", (err) => {
      // Before it was established, the failing connect() below is what schedules the next try.
      if (client !== c) return;
      log.warn("change feed connection lost; reconnecting", { error: err });
      client = undefined;
      // Whatever changed while we were away is picked up by the periodic re-sends.
      reconnect();
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${AGENT_CHANNEL}`);
      await c.query(`LISTEN ${DATABASE_CHANNEL}`);
    } catch (err) {
      await c.end().catch(() => {});
      throw err;
    }
    // Closed while this attempt was connecting: nobody would ever end it.
    if (closed) {
      await c.end().catch(() => {});
      return;
    }
    client = c;
  };
  await connect();

  const subscribe = (key: string, fn: () => void) => {
    emitter.on(key, fn);
    return () => void emitter.off(key, fn);
  };
  return {
    onAgent: (id, fn) => subscribe(`${AGENT_CHANNEL}:${id}`, fn),
    onDatabase: (id, fn) => subscribe(`${DATABASE_CHANNEL}:${id}`, fn),
    async close() {
      closed = true;
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}

/** Queues a notification inside the caller's transaction. */
export async function notify(db: pg.ClientBase, channel: string, payload: string): Promise<void> {
  await db.query("SELECT pg_notify($1, $2)", [channel, payload]);
}
