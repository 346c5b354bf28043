import { ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { type AdminSessionOptions, type AgentConnection, agentClient, assertAnsweringServer } from "./instance-access.ts";

/**
 * The agent's superuser sessions on its customers' servers, kept open between calls (docs/decisions.md, "The
 * agent keeps its superuser sessions on a server"): the calls inside a database (roles, logical databases, extensions, query
 * insights) and a configuration's ALTER SYSTEM and reload each took a new session before — a new backend forked,
 * authenticated and its caches cold, most of a call's time on a busy host.
 *
 * Per instance at most {@link MAX_SESSIONS} sessions, busy or idle; a call that finds them all busy waits its
 * turn (at most its timeout, then {@link SessionsBusy}). A session is one server's: its connection carries the
 * postmaster's generation (pid and start time), so a session of a server that has stopped, restarted or been
 * replaced is never handed out. It is closed when its instance stops, restarts or is deleted ({@link close},
 * called by the runtime before it stops a server), when the server ends it (its `end` event), after any failure
 * of a call made in it that may have left it unusable (the next call opens a new one), when a check before its
 * next call finds it gone, and when idle for long: {@link IDLE_MS} in `postgres`,
 * the agent's own database, but {@link IDLE_OTHER_MS} in a customer's database, shorter than the 5 s a
 * customer's DROP DATABASE waits for other sessions to leave. An idle session holds one of the server's
 * connection slots: the reason for so few and for the idle limits.
 *
 * Every session runs with statement logging off: nothing the agent runs is written to the server's log (a role's
 * verifier is in its statement text, and the log is the customer's to read).
 */

/** Sessions per instance, busy and idle together. */
export const MAX_SESSIONS = 2;
/** How long an idle session in `postgres` is kept. */
export const IDLE_MS = 30_000;
/** How long an idle session in any other database is kept: less than DROP DATABASE waits for other sessions (5 s). */
export const IDLE_OTHER_MS = 2_000;
/** The default wait for a free session, the most a new one takes to connect, and half a statement's limit (agentClient). */
const TIMEOUT_MS = 10_000;
/** How the sessions show in pg_stat_activity. */
export const ADMIN_APPLICATION = "dbaas-agent-admin";

const QUIET = "SET log_statement = 'none'; SET log_min_error_statement = 'panic'; SET log_min_duration_statement = -1";

/** No session of the instance came free in time: its other calls hold them all. */
export class SessionsBusy extends Error {
  constructor(id: string, ms: number) {
    super(`the agent's sessions on ${id} stayed busy for ${ms} ms`);
  }
}

export interface AdminSessions {
  /**
   * `fn` in one of the agent's sessions on the server `conn` reaches (instance `id`), in `opts.database`: an
   * idle one of that server and database if there is one, else a new one. A session `fn` failed in is closed.
   */
  run<T>(id: string, conn: AgentConnection, fn: (c: pg.Client) => Promise<T>, opts?: AdminSessionOptions): Promise<T>;
  /** Closes `id`'s sessions (only those in `database` when given); a busy one is closed when its call ends. */
  close(id: string, database?: string): Promise<void>;
}

interface Session {
  /** The server and database it is on: `host|port|user|generation|database`. */
  key: string;
  database: string;
  client?: pg.Client;
  busy: boolean;
  /** Not to be handed out again: closed when its call ends. */
  doomed: boolean;
  /** It has served a call: checked before the next one. */
  used: boolean;
  timer?: NodeJS.Timeout;
}

interface Waiter {
  wake: () => void;
}

/**
 * Whether a session a call failed in can serve the next one: the call failed on an error PostgreSQL answered
 * (or one of the agent's own, which it throws only after an answer), and the session is outside any transaction.
 * Anything else (a lost connection, a statement timed out and perhaps still running) closes it.
 */
function intact(s: Session, err: unknown): boolean {
  if (s.doomed || !s.client || s.client.getTransactionStatus() !== "I") return false;
  return err instanceof pg.DatabaseError ? err.severity === "ERROR" : err instanceof ConnectError;
}

/** One round trip: whether the server still answers in this session. */
const alive = (c: pg.Client): Promise<boolean> =>
  c.query("SELECT 1").then(
    () => true,
    () => false,
  );

const keyOf = (conn: AgentConnection, database: string) => [conn.host, conn.port, conn.user, conn.generation ?? "", database].join("|");
/** The server part of a key (every field but the database). */
const serverOf = (key: string) => key.slice(0, key.lastIndexOf("|"));

export function createAdminSessions(): AdminSessions {
  const byId = new Map<string, Session[]>();
  const waiters = new Map<string, Waiter[]>();

  const list = (id: string) => {
    let l = byId.get(id);
    if (!l) {
      l = [];
      byId.set(id, l);
    }
    return l;
  };

  /** Removes `s` from `id`'s list and ends its client (resolves when the socket is closed). */
  const drop = async (id: string, s: Session): Promise<void> => {
    const l = byId.get(id);
    if (l) {
      const i = l.indexOf(s);
      if (i >= 0) l.splice(i, 1);
      if (l.length === 0) byId.delete(id);
    }
    clearTimeout(s.timer);
    s.doomed = true;
    const c = s.client;
    s.client = undefined;
    wakeNext(id);
    await c?.end().catch(() => {});
  };

  /** The first waiter of `id` tries again (a session came free, or room for a new one). */
  const wakeNext = (id: string) => {
    const w = waiters.get(id)?.shift();
    if (waiters.get(id)?.length === 0) waiters.delete(id);
    w?.wake();
  };

  const idle = (id: string, s: Session) => {
    s.busy = false;
    clearTimeout(s.timer);
    s.timer = setTimeout(() => void drop(id, s), s.database === "postgres" ? IDLE_MS : IDLE_OTHER_MS);
    s.timer.unref();
    wakeNext(id);
  };

  /** A session of `key` for the caller, busy: an idle one, a new one where there is room, or after a wait. */
  async function acquire(id: string, conn: AgentConnection, database: string, timeoutMs: number): Promise<Session> {
    const key = keyOf(conn, database);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const l = list(id);
      // Sessions of an earlier server of the instance (restarted, replaced) are never used again.
      for (const s of [...l]) {
        if (serverOf(s.key) === serverOf(key)) continue;
        if (s.busy) s.doomed = true;
        else void drop(id, s);
      }
      const free = l.find((s) => !s.busy && !s.doomed && s.key === key && s.client);
      if (free) {
        free.busy = true;
        clearTimeout(free.timer);
        return free;
      }
      // Room: below the limit, or an idle session of another database to give up.
      const other = l.length >= MAX_SESSIONS ? l.find((s) => !s.busy) : undefined;
      if (other) await drop(id, other);
      if (list(id).length < MAX_SESSIONS) return open(id, conn, database, key);
      const left = deadline - Date.now();
      if (left <= 0) throw new SessionsBusy(id, timeoutMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          const q = waiters.get(id);
          const i = q?.indexOf(w) ?? -1;
          if (i >= 0) q!.splice(i, 1);
          resolve();
        }, left);
        const w: Waiter = {
          wake: () => {
            clearTimeout(timer);
            resolve();
          },
        };
        const q = waiters.get(id);
        if (q) q.push(w);
        else waiters.set(id, [w]);
      });
    }
  }

  /** A new session, counted (busy) while it connects (10 s at most); dropped again when it cannot. */
  async function open(id: string, conn: AgentConnection, database: string, key: string): Promise<Session> {
    const s: Session = { key, database, busy: true, doomed: false, used: false };
    list(id).push(s);
    const c = agentClient(conn, { timeoutMs: TIMEOUT_MS, applicationName: ADMIN_APPLICATION, database });
    try {
      await c.connect();
      await assertAnsweringServer(c, conn);
      await c.query(QUIET);
    } catch (err) {
      await c.end().catch(() => {});
      await drop(id, s);
      throw err;
    }
    s.client = c;
    // The server ended it (a stop, a crash of another backend, a terminate): gone from the pool at once.
    c.once("end", () => {
      if (s.client !== c) return;
      if (s.busy) s.doomed = true;
      else void drop(id, s);
    });
    if (s.doomed) {
      await drop(id, s);
      throw new Error(`instance ${id}: its sessions were closed while one was opening`);
    }
    return s;
  }

  async function close(id: string, database?: string): Promise<void> {
    const l = [...(byId.get(id) ?? [])].filter((s) => database === undefined || s.database === database);
    await Promise.all(
      l.map((s) => {
        if (!s.busy) return drop(id, s);
        s.doomed = true;
        return undefined;
      }),
    );
  }

  return {
    async run<T>(id: string, conn: AgentConnection, fn: (c: pg.Client) => Promise<T>, opts: AdminSessionOptions = {}): Promise<T> {
      const database = opts.database ?? "postgres";
      const timeoutMs = opts.timeoutMs ?? TIMEOUT_MS;
      let s = await acquire(id, conn, database, timeoutMs);
      // A kept session is asked first whether it is still there (one round trip, no backend started): one the
      // server ended while it was idle (a terminate, a crash of another backend) is replaced, and the call
      // never runs in it. At most MAX_SESSIONS such checks fail before a new session is opened.
      while (s.used && !(await alive(s.client!))) {
        await drop(id, s);
        s = await acquire(id, conn, database, timeoutMs);
      }
      s.used = true;
      let out: T;
      try {
        out = await fn(s.client!);
      } catch (err) {
        if (intact(s, err)) idle(id, s);
        else await drop(id, s);
        throw err;
      }
      if (s.doomed || !s.client) await drop(id, s);
      else idle(id, s);
      return out;
    },
    close,
  };
}
