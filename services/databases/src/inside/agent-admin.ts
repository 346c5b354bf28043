import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { conflict, dependencyUnavailable, notFound } from "@dbaas/kit";
import type { InstanceAdminService } from "@dbaas/proto/instance-admin";
import type { AppContext } from "../context.ts";
import { findOwned, type DatabaseRow } from "../db/databases.ts";
import { controlUrlOf } from "../db/inside.ts";

/**
 * The way inside a running database: its agent's InstanceAdminService
 * (docs/product.md, Inside the database). The server is the truth about its
 * roles, logical databases and extensions, so they are read and changed there,
 * by the agent as superuser, while it runs; what the agent answers is passed
 * on with its code, anything else is 503.
 */

export interface Inside {
  row: DatabaseRow;
  admin: Client<typeof InstanceAdminService>;
}

/** Outcomes of PostgreSQL the agent names, passed on as they are. */
const PASSED_ON = new Set([Code.NotFound, Code.AlreadyExists, Code.FailedPrecondition, Code.InvalidArgument]);

/** The agent's InstanceAdminService at `controlUrl`; 503 when the agent registered none. */
export function adminAt(ctx: AppContext, controlUrl: string, databaseId: string): Client<typeof InstanceAdminService> {
  if (controlUrl === "") {
    ctx.log.warn("the database's agent registered no control URL (AGENT_CONTROL_URL)", { database_id: databaseId });
    throw dependencyUnavailable("the database's host cannot be reached right now; try again shortly");
  }
  return ctx.instanceAdmin(controlUrl);
}

/**
 * The organization's live database `id` (NOT_FOUND otherwise), running
 * (FAILED_PRECONDITION naming its status otherwise: `what` says what needs it),
 * with a client of its agent.
 */
export async function runningInside(ctx: AppContext, organizationId: string, id: string, what: string): Promise<Inside> {
  const row = await findOwned(ctx.pool, organizationId, id);
  if (!row) throw notFound("database");
  if (row.status !== "running") throw conflict(`the database is ${row.status}: ${what} only while it is running`);
  return { row, admin: adminAt(ctx, await controlUrlOf(ctx.pool, row.agent_id), row.id) };
}

/** A call to an agent: its business outcomes as they are, a failure to reach it as 503 (logged). */
export async function askAgent<T>(ctx: AppContext, databaseId: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const e = ConnectError.from(err);
    if (PASSED_ON.has(e.code)) throw new ConnectError(e.rawMessage, e.code);
    ctx.log.warn("the database's agent did not answer", { database_id: databaseId, code: Code[e.code], error: e.rawMessage });
    throw dependencyUnavailable("the database's host did not answer; try again shortly");
  }
}
