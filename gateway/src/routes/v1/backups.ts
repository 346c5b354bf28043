import type { Backup } from "@dbaas/proto/databases";
import { accepted, created, list, type Reply } from "../../middleware/envelope.ts";
import { body, optional, pagination, PAGINATION_QUERY, timestamp, type Infer } from "../../schema.ts";
import { backupStatusName, backupTypeName, iso, orNull, present, restoredFrom, timestampOf } from "../mappers.ts";
import type { AuthedCall } from "../route.ts";
import { createdRecord, databaseName, region, tier } from "./databases.ts";

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

function backup(b: Backup) {
  return {
    id: b.id,
    type: backupTypeName(b.type),
    status: backupStatusName(b.status),
    started_at: iso(present(b.startedAt, "backup.started_at")),
    completed_at: iso(b.completedAt),
    size_bytes: Number(b.sizeBytes),
    failure_reason: orNull(b.failureReason),
  };
}

/** The backups, newest first, and beside them the restore window and whether WAL archiving keeps it moving. */
export async function listBackups(call: AuthedCall<unknown>): Promise<Reply> {
  const { page, perPage } = pagination(call.query);
  const res = await call.ctx.databases.listBackups({
    organizationId: call.principal.organizationId,
    databaseId: call.params.id,
    page,
    perPage,
  });
  return list(
    "backups",
    res.backups.map(backup),
    { page, perPage, total: res.total },
    {
      earliest_restore_time: iso(res.earliestRestoreTime),
      latest_restore_time: iso(res.latestRestoreTime),
      wal_archiving: { status: res.archiveError === "" ? "healthy" : "failing", error: orNull(res.archiveError) },
    },
  );
}

/** 202: the backup runs on after the answer; its record says `running` until the agent reports it. */
export async function createBackup(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.createBackup({ organizationId: call.principal.organizationId, databaseId: call.params.id });
  return accepted(backup(present(res.backup, "backup")));
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
  const from = restoredFrom(present(res.database, "database").restoredFrom);
  return created({ ...createdRecord(res), restored_from: present(from, "database.restored_from") });
}
