import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { ADMIN_ROLE, type InstanceAccess } from "../instance-access.ts";
import { assertPlainName, assertVerifier, inTransaction, withAdminSession } from "./session.ts";

/**
 * The customer's roles inside a server (docs/product.md, Inside the database):
 * made, dropped and given new verifiers by the agent as superuser. A customer
 * role is never superuser, replication or bypassrls; the agent's own role and
 * the replication role (both superuser or replication) and PostgreSQL's
 * predefined `pg_*` roles are not the customer's and are never shown or touched.
 */

export interface CustomerRole {
  name: string;
  login: boolean;
  createDb: boolean;
  createRole: boolean;
}

const CUSTOMER_ROLES = "NOT rolsuper AND NOT rolreplication AND NOT rolbypassrls AND rolname !~ '^pg_'";

/** Serialises creates on one server, so two at once cannot both pass the count. */
const ROLES_LOCK = 7_240_001;

async function customerRole(c: pg.Client, name: string): Promise<CustomerRole | undefined> {
  const { rows } = await c.query<{ rolname: string; rolcanlogin: boolean; rolcreatedb: boolean; rolcreaterole: boolean }>(
    `SELECT rolname, rolcanlogin, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = $1 AND ${CUSTOMER_ROLES}`,
    [name],
  );
  const r = rows[0];
  return r && { name: r.rolname, login: r.rolcanlogin, createDb: r.rolcreatedb, createRole: r.rolcreaterole };
}

const noSuchRole = (name: string) => new ConnectError(`role ${name} does not exist`, Code.NotFound);

/** Ends every session of `name` but the caller's; how many there were. */
async function endSessions(c: pg.Client, name: string): Promise<number> {
  const { rows } = await c.query<{ n: number }>(
    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()",
    [name],
  );
  return rows[0]?.n ?? 0;
}

export async function listRoles(access: InstanceAccess, id: string): Promise<CustomerRole[]> {
  return withAdminSession(access, id, async (c) => {
    const { rows } = await c.query<{ rolname: string; rolcanlogin: boolean; rolcreatedb: boolean; rolcreaterole: boolean }>(
      `SELECT rolname, rolcanlogin, rolcreatedb, rolcreaterole FROM pg_roles WHERE ${CUSTOMER_ROLES} ORDER BY rolname`,
    );
    return rows.map((r) => ({ name: r.rolname, login: r.rolcanlogin, createDb: r.rolcreatedb, createRole: r.rolcreaterole }));
  });
}

/**
 * A LOGIN role with `verifier` as its password, never superuser, replication
 * or bypassrls. dbadmin gets ADMIN OPTION on it (without inheriting its
 * privileges or becoming it), as it would on a role it made itself with
 * CREATEROLE, so the customer can grant it, alter it or drop it in SQL too.
 * FAILED_PRECONDITION when `maxRoles` customer roles exist already.
 */
export async function createRole(
  access: InstanceAccess,
  id: string,
  o: { name: string; verifier: string; maxRoles: number },
): Promise<CustomerRole> {
  assertPlainName("role", o.name);
  assertVerifier(o.verifier);
  return withAdminSession(access, id, (c) =>
    inTransaction(c, async () => {
      await c.query("SELECT pg_advisory_xact_lock($1)", [ROLES_LOCK]);
      const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_roles WHERE ${CUSTOMER_ROLES}`);
      if (o.maxRoles > 0 && rows[0]!.n >= o.maxRoles)
        throw new ConnectError(`the database has ${rows[0]!.n} roles; at most ${o.maxRoles} are allowed`, Code.FailedPrecondition);
      const role = c.escapeIdentifier(o.name);
      await c.query(
        `CREATE ROLE ${role} LOGIN NOSUPERUSER NOREPLICATION NOBYPASSRLS NOCREATEDB NOCREATEROLE INHERIT PASSWORD ${c.escapeLiteral(o.verifier)}`,
      );
      await c.query(`GRANT ${role} TO ${c.escapeIdentifier(ADMIN_ROLE)} WITH ADMIN OPTION, INHERIT FALSE, SET FALSE`);
      return (await customerRole(c, o.name))!;
    }),
  );
}

/**
 * Drops a customer role and ends its sessions. FAILED_PRECONDITION (with
 * PostgreSQL's detail: which objects, which databases) while it owns objects
 * or holds privileges; NOT_FOUND for a name that is not a customer role.
 */
export async function dropRole(access: InstanceAccess, id: string, name: string): Promise<void> {
  assertPlainName("role", name);
  await withAdminSession(access, id, async (c) => {
    if (!(await customerRole(c, name))) throw noSuchRole(name);
    try {
      await c.query(`DROP ROLE ${c.escapeIdentifier(name)}`);
    } catch (err) {
      const e = err as { code?: string; message?: string; detail?: string };
      if (e.code !== "2BP01") throw err;
      throw new ConnectError(
        `${e.message}: ${e.detail ?? ""}; in each of those databases run REASSIGN OWNED BY ${name} TO dbadmin and DROP OWNED BY ${name} as dbadmin first`,
        Code.FailedPrecondition,
      );
    }
    await endSessions(c, name);
  });
}

/**
 * Replaces a customer role's verifier, then ends its open sessions: from the
 * answer on, neither a new login nor a session opened with the old password
 * works on this server. Answers the WAL position a replica must have
 * replayed to hold the new verifier too.
 */
export async function setRolePassword(
  access: InstanceAccess,
  id: string,
  o: { name: string; verifier: string },
): Promise<{ walLsn: string; sessionsEnded: number }> {
  assertPlainName("role", o.name);
  assertVerifier(o.verifier);
  return withAdminSession(access, id, async (c) => {
    if (!(await customerRole(c, o.name))) throw noSuchRole(o.name);
    await c.query(`ALTER ROLE ${c.escapeIdentifier(o.name)} PASSWORD ${c.escapeLiteral(o.verifier)}`);
    const sessionsEnded = await endSessions(c, o.name);
    const { rows } = await c.query<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn");
    return { walLsn: rows[0]!.lsn, sessionsEnded };
  });
}

/** How long a replica may take to replay up to a role's change before its sessions are ended anyway. */
const REPLAY_WAIT_MS = 10_000;

/**
 * On a replica: waits (up to 10 s) until it has replayed up to `walLsn`, then
 * ends `name`'s sessions, so none opened with the old password survives and
 * a new one needs the new password. Ends them even when the wait runs out.
 */
export async function endRoleSessions(access: InstanceAccess, id: string, o: { name: string; walLsn: string }): Promise<number> {
  assertPlainName("role", o.name);
  return withAdminSession(access, id, async (c) => {
    if (o.walLsn !== "") {
      const deadline = Date.now() + REPLAY_WAIT_MS;
      for (;;) {
        const { rows } = await c.query<{ done: boolean | null }>("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done", [o.walLsn]);
        // null: not a standby (a promoted replica); nothing to wait for.
        if (rows[0]?.done !== false || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    return endSessions(c, o.name);
  });
}
