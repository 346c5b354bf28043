import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { DEFAULT_DATABASE, type InstanceAccess } from "../instance-access.ts";
import { assertPlainName, withAdminSession } from "./session.ts";

/**
 * Extensions of a server (docs/product.md, Inside the database): what its binaries offer and what a
 * logical database has, installed and dropped as superuser. Which ones a customer may install is the
 * databases service's allowlist; the agent only refuses names that could not be extension names.
 */

export interface ServerExtension {
  name: string;
  defaultVersion: string;
  installedVersion: string;
  trusted: boolean;
  comment: string;
}

/** Extension names as control files name them (uuid-ossp has a dash). */
const EXTENSION_NAME = /^[a-z0-9_][a-z0-9_-]{0,62}$/;

function assertExtensionName(name: string): void {
  if (!EXTENSION_NAME.test(name))
    throw new ConnectError(`extension ${JSON.stringify(name)} is not an extension name`, Code.InvalidArgument);
}

const LIST = `
  SELECT a.name, a.default_version, COALESCE(e.extversion, '') AS installed_version, COALESCE(a.comment, '') AS comment,
         COALESCE((SELECT v.trusted FROM pg_available_extension_versions v WHERE v.name = a.name AND v.version = a.default_version), false) AS trusted
  FROM pg_available_extensions a LEFT JOIN pg_extension e ON e.extname = a.name`;

type Row = { name: string; default_version: string; installed_version: string; comment: string; trusted: boolean };
const toExtension = (r: Row): ServerExtension => ({
  name: r.name,
  defaultVersion: r.default_version,
  installedVersion: r.installed_version,
  trusted: r.trusted,
  comment: r.comment,
});

/** A session on logical database `db` (defaultdb when empty); NOT_FOUND naming it when there is none. */
function onDb<T>(access: InstanceAccess, id: string, db: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const database = db === "" ? DEFAULT_DATABASE : db;
  assertPlainName("database", database);
  return withAdminSession(access, id, fn, { database }).catch((err: unknown) => {
    if (err instanceof ConnectError && err.code === Code.NotFound && /database .* does not exist/.test(err.rawMessage))
      throw new ConnectError(`db: database ${database} does not exist`, Code.NotFound);
    throw err;
  });
}

export async function listExtensions(access: InstanceAccess, id: string, db: string): Promise<ServerExtension[]> {
  return onDb(access, id, db, async (c) => (await c.query<Row>(`${LIST} ORDER BY a.name`)).rows.map(toExtension));
}

/** CREATE EXTENSION (its default version, its default schema) in `db`; installing one already there changes nothing. */
export async function installExtension(access: InstanceAccess, id: string, db: string, name: string): Promise<ServerExtension> {
  assertExtensionName(name);
  return onDb(access, id, db, async (c) => {
    const { rows } = await c.query<Row>(`${LIST} WHERE a.name = $1`, [name]);
    if (!rows[0]) throw new ConnectError(`extension ${name} is not available on this server`, Code.NotFound);
    await c.query(`CREATE EXTENSION IF NOT EXISTS ${c.escapeIdentifier(name)}`);
    return toExtension((await c.query<Row>(`${LIST} WHERE a.name = $1`, [name])).rows[0]!);
  });
}

/** DROP EXTENSION from `db` (not CASCADE: FAILED_PRECONDITION, with PostgreSQL's detail, while objects depend on it). */
export async function dropExtension(access: InstanceAccess, id: string, db: string, name: string): Promise<void> {
  assertExtensionName(name);
  await onDb(access, id, db, async (c) => {
    const { rowCount } = await c.query("SELECT 1 FROM pg_extension WHERE extname = $1", [name]);
    if (rowCount === 0) throw new ConnectError(`extension ${name} is not installed`, Code.NotFound);
    await c.query(`DROP EXTENSION ${c.escapeIdentifier(name)}`);
  });
}
