import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { ADMIN_APPLICATION } from "../admin-sessions.ts";
import type { InstanceAccess } from "../instance-access.ts";
import { assertPlainName, withAdminSession } from "./session.ts";

/**
 * The logical databases of a server: what the customer sees is every
 * database but `postgres` (the agent's own) and the templates.
 */

export interface CustomerDb {
  name: string;
  owner: string;
  sizeBytes: bigint;
}

const CUSTOMER_DBS = "NOT datistemplate AND datname <> 'postgres'";

type Row = { datname: string; owner: string; size: string };

const SELECT = `SELECT datname, pg_get_userbyid(datdba) AS owner, pg_database_size(oid)::text AS size FROM pg_database WHERE ${CUSTOMER_DBS}`;

const toDb = (r: Row): CustomerDb => ({ name: r.datname, owner: r.owner, sizeBytes: BigInt(r.size) });

async function customerDb(c: pg.Client, name: string): Promise<CustomerDb | undefined> {
  const { rows } = await c.query<Row>(`${SELECT} AND datname = $1`, [name]);
  return rows[0] && toDb(rows[0]);
}

export async function listDbs(access: InstanceAccess, id: string): Promise<CustomerDb[]> {
  return withAdminSession(access, id, async (c) => (await c.query<Row>(`${SELECT} ORDER BY datname`)).rows.map(toDb));
}

/** Serialises creates on one server, so two at once cannot both pass the count. */
const DBS_LOCK = 7_240_002;

/**
 * CREATE DATABASE `name` OWNER `owner` (a customer role: not superuser,
 * replication or `pg_*`; INVALID_ARGUMENT otherwise). FAILED_PRECONDITION
 * when `maxDbs` exist already.
 */
export async function createDb(
  access: InstanceAccess,
  id: string,
  o: { name: string; owner: string; maxDbs: number },
): Promise<CustomerDb> {
  assertPlainName("database", o.name);
  assertPlainName("owner", o.owner);
  return withAdminSession(access, id, async (c) => {
    // CREATE DATABASE cannot run in a transaction: a session-level lock keeps the count honest.
    await c.query("SELECT pg_advisory_lock($1)", [DBS_LOCK]);
    try {
      const owner = await c.query(
        "SELECT 1 FROM pg_roles WHERE rolname = $1 AND NOT rolsuper AND NOT rolreplication AND rolname !~ '^pg_'",
        [o.owner],
      );
      if (owner.rowCount === 0) throw new ConnectError(`owner: role ${o.owner} does not exist`, Code.InvalidArgument);
      const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_database WHERE ${CUSTOMER_DBS}`);
      if (o.maxDbs > 0 && rows[0]!.n >= o.maxDbs)
        throw new ConnectError(`the server has ${rows[0]!.n} databases; at most ${o.maxDbs} are allowed`, Code.FailedPrecondition);
      await c.query(`CREATE DATABASE ${c.escapeIdentifier(o.name)} OWNER ${c.escapeIdentifier(o.owner)}`);
      return (await customerDb(c, o.name))!;
    } finally {
      // Not swallowed: a session kept open must not keep the lock (a failure here closes it).
      await c.query("SELECT pg_advisory_unlock($1)", [DBS_LOCK]);
    }
  });
}

/** DROP DATABASE; FAILED_PRECONDITION (naming how many) while anyone is connected to it. */
export async function dropDb(access: InstanceAccess, id: string, name: string): Promise<void> {
  assertPlainName("database", name);
  await withAdminSession(access, id, async (c) => {
    if (!(await customerDb(c, name))) throw new ConnectError(`database ${name} does not exist`, Code.NotFound);
    // The agent's own idle sessions there (an extensions call's) are ended; DROP DATABASE waits for them to exit.
    await c.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND usename = current_user AND application_name = $2 AND state = 'idle'",
      [name, ADMIN_APPLICATION],
    );
    const { rows } = await c.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND NOT (usename = current_user AND application_name = $2)",
      [name, ADMIN_APPLICATION],
    );
    if (rows[0]!.n > 0)
      throw new ConnectError(`database ${name} has ${rows[0]!.n} open connection(s); close them first`, Code.FailedPrecondition);
    await c.query(`DROP DATABASE ${c.escapeIdentifier(name)}`);
  });
}
