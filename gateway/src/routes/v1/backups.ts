import { accepted, created, list, type Reply } from "../../middleware/envelope.ts";
import { body, optional, pagination, PAGINATION_QUERY, timestamp, type Infer } from "../../schema.ts";
import { present, timestampOf } from "../mappers.ts";
import { BACKUP, RESTORE_WINDOW, RESTORED_DATABASE } from "../responses.ts";
import type { AuthedCall } from "../route.ts";
import { databaseName, region, tier } from "./databases.ts";

export const listQuery = PAGINATION_QUERY;

export const restoreBody = body({
  name: databaseName("Name of the new database."),
  restore_time: optional(
    timestamp(
      "The instant to restore to (RFC 3339), within the window `GET /v1/databases/{id}/backups` shows; default: the latest restorable instant.",
    ),
  ),
  tier: optional(tier("Instance tier of the new database; default: the source's")),
  region: optional(region("Region of the new database; default: the source's")),
});

/** The backups, newest first, and beside them the restore window and whether WAL archiving keeps it moving. */
export async function listBackups(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.databases.listBackups({
    organizationId: call.principal.organizationId,
    databaseId: call.params.id,
    page,
    perPage,
  });
  return list("backups", res.backups.map(BACKUP.map), { page, perPage, total: res.total }, RESTORE_WINDOW.map(res));
}

/** 202: the backup runs on after the answer; its record says `running` until the agent reports it. */
export async function createBackup(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.createBackup({ organizationId: call.principal.organizationId, databaseId: call.params.id });
  return accepted(BACKUP.map(present(res.backup, "backup")));
}

/** A new database made from the source's backups, answered as create answers, plus where it came from. */
export async function restoreDatabase(call: AuthedCall<Infer<typeof restoreBody>>): Promise<Reply> {
  const { body } = call;
  const res = await call.ctx.databases.restoreToTime({
    organizationId: call.principal.organizationId,
    sourceDatabaseId: call.params.id,
    name: body.name,
    ...(body.restore_time !== undefined && { restoreTime: timestampOf(body.restore_time) }),
    tier: body.tier ?? "",
    region: body.region ?? "",
  });
  return created(RESTORED_DATABASE.map(res));
}
