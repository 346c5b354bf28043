import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { checkPaging, notFound, Validator } from "@dbaas/kit";
import {
  CreateBackupResponseSchema,
  ListBackupsResponseSchema,
  type CreateBackupRequest,
  type CreateBackupResponse,
  type ListBackupsRequest,
  type ListBackupsResponse,
} from "@dbaas/proto/databases";
import { restorable, startManualBackup } from "../backups.ts";
import type { AppContext } from "../context.ts";
import { listBackups as listRows, windowOf } from "../db/backups.ts";
import { ownsLive } from "../db/databases.ts";
import { toBackup } from "../mappers.ts";

/** A live database's backups, newest first, a page at a time, with its restore window and why archiving fails, if it does. */
export function listBackups(ctx: AppContext) {
  return async (req: ListBackupsRequest): Promise<ListBackupsResponse> => {
    const v = new Validator();
    const { page, perPage } = checkPaging(v, req.page, req.perPage);
    v.throwIfAny();
    if (!(await ownsLive(ctx.pool, req.organizationId, req.databaseId))) throw notFound("database");
    const [{ rows, total }, state] = await Promise.all([
      listRows(ctx.pool, req.databaseId, perPage, (page - 1) * perPage),
      windowOf(ctx.pool, req.databaseId),
    ]);
    const window = restorable(state);
    return create(ListBackupsResponseSchema, {
      backups: rows.map(toBackup),
      total,
      page,
      perPage,
      earliestRestoreTime: window && timestampFromDate(window.earliest),
      latestRestoreTime: window && timestampFromDate(window.latest),
      archiveError: state?.archive_error ?? "",
    });
  };
}

/** A manual backup of a running database, one at a time; answered at once, status running. */
export function createBackup(ctx: AppContext) {
  return async (req: CreateBackupRequest): Promise<CreateBackupResponse> => {
    const backup = await startManualBackup(ctx, req.organizationId, req.databaseId);
    return create(CreateBackupResponseSchema, { backup: toBackup(backup) });
  };
}
