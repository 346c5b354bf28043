import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { checkPaging, conflict, notConfirmedInTime, notFound, Validator } from "@dbaas/kit";
import { ResetPasswordRequestSchema } from "@dbaas/proto/databases";
import { DbRoleSchema, type DbRole } from "@dbaas/proto/inside";
import type { InstanceRole } from "@dbaas/proto/instance-admin";
import type { AppContext } from "../context.ts";
import { forgetRole, recordRole, roleCreationTimes, runningReplicasOf } from "../db/inside.ts";
import { resetPassword } from "../handlers/reset-password.ts";
import { DATABASE_NAME, hostOf, USERNAME } from "../mappers.ts";
import { newCredentials } from "../scram.ts";
import { adminAt, askAgent, runningInside } from "./agent-admin.ts";
import { isPlainName, validateRoleName } from "./names.ts";

/** docs/product.md, Inside the database: at most 50 roles per database (dbadmin and roles made in SQL count). */
export const MAX_ROLES = 50;

const WHAT = "roles can be managed";

function toRole(r: InstanceRole, createdAt: Date | undefined): DbRole {
  return create(DbRoleSchema, {
    name: r.name,
    login: r.login,
    createDb: r.createDb,
    createRole: r.createRole,
    builtin: r.name === USERNAME,
    ...(createdAt && { createdAt: timestampFromDate(createdAt) }),
  });
}

/** The connection string of `user` with `password` in clear, to the database's defaultdb. */
export function roleConnectionString(row: { id: string; port: number }, domain: string, user: string, password: string): string {
  return `postgresql://${user}:${password}@${hostOf(row.id, domain)}:${row.port}/${DATABASE_NAME}?sslmode=require`;
}

/** A name from a path: one that cannot be a role is an unknown role. */
function knownName(name: string): string {
  if (!isPlainName(name)) throw notFound("role");
  return name;
}

export async function listRoles(ctx: AppContext, req: { organizationId: string; databaseId: string; page: number; perPage: number }) {
  const v = new Validator();
  const { page, perPage } = checkPaging(v, req.page, req.perPage);
  v.throwIfAny();
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  const { roles } = await askAgent(ctx, row.id, () => admin.listRoles({ databaseId: row.id }));
  const slice = roles.slice((page - 1) * perPage, page * perPage);
  const times = await roleCreationTimes(
    ctx.pool,
    row.id,
    slice.map((r) => r.name),
  );
  return { roles: slice.map((r) => toRole(r, times.get(r.name))), total: roles.length, page, perPage };
}

/**
 * A new LOGIN role: its password is drawn here and only its SCRAM verifier
 * goes to the agent, which creates the role as superuser (never superuser,
 * replication or bypassrls itself). The password is in this answer only.
 */
export async function createRole(ctx: AppContext, req: { organizationId: string; databaseId: string; name: string }) {
  const v = new Validator();
  validateRoleName(v, "name", req.name);
  v.throwIfAny();
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  const { password, verifier } = newCredentials(ctx.cfg.scramIterations);
  const res = await askAgent(ctx, row.id, () =>
    admin.createRole({ databaseId: row.id, name: req.name, scramVerifier: verifier, maxRoles: MAX_ROLES }),
  );
  const createdAt = await recordRole(ctx.pool, row.id, req.name);
  ctx.log.info("role created", { database_id: row.id, role: req.name });
  return {
    role: toRole(res.role!, createdAt),
    password,
    connectionString: roleConnectionString(row, ctx.cfg.databaseDomain, req.name, password),
  };
}

/** Drops a role and ends its sessions; dbadmin cannot go (409), nor a role that still owns objects (409 saying where). */
export async function deleteRole(ctx: AppContext, req: { organizationId: string; databaseId: string; name: string }): Promise<void> {
  const name = knownName(req.name);
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  if (name === USERNAME) throw conflict(`${USERNAME} is the database's own role and cannot be deleted`);
  await askAgent(ctx, row.id, () => admin.dropRole({ databaseId: row.id, name }));
  await forgetRole(ctx.pool, row.id, name);
  ctx.log.info("role deleted", { database_id: row.id, role: name });
}

/**
 * Time kept back from the caller's own deadline when asking a replica's agent,
 * so that a silent one is this handler's 504 (SESSIONS_NOT_ENDED) rather than
 * the caller's transport timeout, which would not say the password was set.
 */
const ANSWER_MARGIN_MS = 500;

const SESSIONS_NOT_ENDED =
  "the new password is set, but the role's sessions on a replica could not be ended (its host did not answer); reset again to get a password you can use";

/**
 * A new password for a role, answered once the old one is refused and every
 * session opened with it has ended — on the database and, after they replayed
 * the change, on its running replicas. dbadmin's is the database's own
 * reset-password (the password the control plane hands every start).
 */
export async function resetRolePassword(
  ctx: AppContext,
  req: { organizationId: string; databaseId: string; name: string },
  handlerCtx: HandlerContext,
) {
  const name = knownName(req.name);
  if (name === USERNAME) {
    const res = await resetPassword(ctx)(
      create(ResetPasswordRequestSchema, { organizationId: req.organizationId, id: req.databaseId }),
      handlerCtx,
    );
    return {
      role: create(DbRoleSchema, { name: USERNAME, login: true, createDb: true, createRole: true, builtin: true }),
      password: res.password,
      connectionString: res.connectionString,
    };
  }
  const { row, admin } = await runningInside(ctx, req.organizationId, req.databaseId, WHAT);
  const { password, verifier } = newCredentials(ctx.cfg.scramIterations);
  const res = await askAgent(ctx, row.id, () => admin.setRolePassword({ databaseId: row.id, name, scramVerifier: verifier }));
  for (const replica of await runningReplicasOf(ctx.pool, row.id)) {
    const callerLeft = handlerCtx.timeoutMs();
    const options = callerLeft === undefined ? {} : { timeoutMs: Math.max(1, callerLeft - ANSWER_MARGIN_MS) };
    try {
      await askAgent(ctx, replica.id, () =>
        adminAt(ctx, replica.control_url, replica.id).endRoleSessions({ databaseId: replica.id, name, walLsn: res.walLsn }, options),
      );
    } catch (err) {
      ctx.log.warn("a role's sessions on a replica were not ended", { database_id: row.id, replica_id: replica.id, error: err });
      throw notConfirmedInTime(SESSIONS_NOT_ENDED);
    }
  }
  const { roles } = await askAgent(ctx, row.id, () => admin.listRoles({ databaseId: row.id }));
  const role = roles.find((r) => r.name === name);
  const times = await roleCreationTimes(ctx.pool, row.id, [name]);
  ctx.log.info("role password reset", { database_id: row.id, role: name, sessions_ended: res.sessionsEnded });
  return {
    role: role ? toRole(role, times.get(name)) : create(DbRoleSchema, { name, login: true }),
    password,
    connectionString: roleConnectionString(row, ctx.cfg.databaseDomain, name, password),
  };
}
