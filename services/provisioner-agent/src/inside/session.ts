import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { SessionsBusy } from "../admin-sessions.ts";
import { INSTANCE_ID_RE, type InstanceAccess, ServerNotRunning } from "../instance-access.ts";

/**
 * The agent's sessions inside a customer's server for the databases service's
 * InstanceAdminService: as its superuser over the server's own socket
 * (`InstanceAccess.adminSession`: sessions kept open between calls, statement
 * logging off), never through the published port. PostgreSQL's outcomes
 * become Connect codes the databases service passes on.
 */

/** Role and database names the agent acts on: plain identifiers (the databases service's rule, checked again here). */
export const PLAIN_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** SQLSTATEs the admin calls expect, and what the caller hears. */
const SQLSTATE_CODES: Readonly<Record<string, Code>> = {
  "42710": Code.AlreadyExists, // duplicate_object
  "42P04": Code.AlreadyExists, // duplicate_database
  "42704": Code.NotFound, // undefined_object
  "3D000": Code.NotFound, // invalid_catalog_name
  "2BP01": Code.FailedPrecondition, // dependent_objects_still_exist
  "55006": Code.FailedPrecondition, // object_in_use
  "25006": Code.FailedPrecondition, // read_only_sql_transaction (a replica)
  "0A000": Code.FailedPrecondition, // feature_not_supported
  "42501": Code.FailedPrecondition, // insufficient_privilege
  "58P01": Code.NotFound, // undefined_file (an extension without its files)
  "22023": Code.InvalidArgument, // invalid_parameter_value
  "42602": Code.InvalidArgument, // invalid_name
};

/** Errors of connecting: the server is not there (stopped, starting, crashed, moved). */
const NOT_THERE = new Set(["ECONNREFUSED", "ENOENT", "57P03", "57P01"]);

export const notRunning = (id: string) => new ConnectError(`the server of ${id} is not running on this host`, Code.FailedPrecondition);

/** A PostgreSQL error (or any other) as the Connect error the databases service hears. */
export function asConnectError(id: string, err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof ServerNotRunning) return notRunning(id);
  if (err instanceof SessionsBusy) return new ConnectError(err.message, Code.Unavailable);
  const e = err as { code?: string; message?: string; detail?: string };
  if (e.code && NOT_THERE.has(e.code)) return notRunning(id);
  const code = e.code ? SQLSTATE_CODES[e.code] : undefined;
  const message = [e.message ?? String(err), e.detail].filter(Boolean).join(": ");
  return new ConnectError(message, code ?? Code.Internal);
}

/**
 * `fn` in one of the agent's superuser sessions on `id`'s running server
 * (database `postgres` unless `database` names another), with statement
 * logging off; FAILED_PRECONDITION when no server of `id` runs here.
 */
export async function withAdminSession<T>(
  access: InstanceAccess,
  id: string,
  fn: (c: pg.Client) => Promise<T>,
  opts: { database?: string; timeoutMs?: number } = {},
): Promise<T> {
  if (!INSTANCE_ID_RE.test(id)) throw new ConnectError(`invalid database id ${JSON.stringify(id)}`, Code.InvalidArgument);
  try {
    return await access.adminSession(id, fn, opts);
  } catch (err) {
    throw asConnectError(id, err);
  }
}

/** `fn` inside BEGIN … COMMIT on `c` (ROLLBACK when it throws). */
export async function inTransaction<T>(c: pg.Client, fn: () => Promise<T>): Promise<T> {
  await c.query("BEGIN");
  try {
    const out = await fn();
    await c.query("COMMIT");
    return out;
  } catch (err) {
    await c.query("ROLLBACK").catch(() => {});
    throw err;
  }
}

/** Throws INVALID_ARGUMENT unless `name` is a plain identifier. */
export function assertPlainName(what: string, name: string): void {
  if (!PLAIN_IDENTIFIER.test(name) || name.startsWith("pg_"))
    throw new ConnectError(`${what} ${JSON.stringify(name)} is not a plain identifier`, Code.InvalidArgument);
}

const B64 = "[A-Za-z0-9+/]+={0,2}";
const VERIFIER_RE = new RegExp(`^SCRAM-SHA-256\\$(\\d+):(${B64})\\$(${B64}):(${B64})$`);

/**
 * Throws INVALID_ARGUMENT unless `v` is a well-formed SCRAM-SHA-256 verifier:
 * PostgreSQL stores one as it is but hashes anything else as a password in
 * clear, so nothing else may reach a PASSWORD clause.
 */
export function assertVerifier(v: string): void {
  const m = VERIFIER_RE.exec(v);
  const ok =
    !!m &&
    Number(m[1]) > 0 &&
    Buffer.from(m[2]!, "base64").length > 0 &&
    Buffer.from(m[3]!, "base64").length === 32 &&
    Buffer.from(m[4]!, "base64").length === 32;
  if (!ok) throw new ConnectError("scram_verifier must be SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>", Code.InvalidArgument);
}
