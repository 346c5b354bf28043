import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { conflict, invalidArgument } from "@dbaas/kit";
import {
  BackupSchema,
  BackupStatus,
  BackupType,
  RestoredFromSchema,
  type CreateDatabaseRequest,
  type Database,
  type DatabasesService,
} from "@dbaas/proto/databases";
import { record, T0, type StubState } from "./stub-state.ts";

/** The restore window `seedBackups` gives a database. */
export const WINDOW = { earliest: new Date("2025-03-01T11:00:00Z"), latest: new Date("2025-03-01T12:00:00Z") };

/** Gives a database what the databases service would hold after one scheduled backup completed. */
export function seedBackups(state: StubState, databaseId: string): void {
  const completed = create(BackupSchema, {
    id: `bkp-seed${databaseId.slice(3)}`,
    databaseId,
    type: BackupType.SCHEDULED,
    status: BackupStatus.COMPLETED,
    startedAt: timestampFromDate(WINDOW.earliest),
    completedAt: timestampFromDate(new Date(WINDOW.earliest.getTime() + 42_000)),
    sizeBytes: 5_242_880n,
  });
  state.backups.set(databaseId, { backups: [completed], ...WINDOW, archiveError: "" });
}

type Find = (org: string, id: string) => Promise<{ db: Database }>;
/** CreateDatabase's checks and record (stubs.ts), which a restore goes through as the service's does. */
type NewDatabase = (
  state: StubState,
  req: Pick<CreateDatabaseRequest, "organizationId" | "name" | "region" | "tier" | "version">,
) => { database: Database; password: string; connectionString: string };

/**
 * ListBackups, CreateBackup and RestoreToTime as the databases service's
 * contract states them (databases_service.proto): one running backup at a
 * time and only of a running database (FAILED_PRECONDITION), a restore inside
 * the window (INVALID_ARGUMENT naming restore_time otherwise) answered like
 * CreateDatabase with restored_from set.
 */
export function backupRoutes(
  state: StubState,
  find: Find,
  newDatabase: NewDatabase,
): Pick<ServiceImpl<typeof DatabasesService>, "listBackups" | "createBackup" | "restoreToTime"> {
  const log = (databaseId: string, type: string) => {
    const ops = state.operations.get(databaseId) ?? [];
    ops.push({ id: `op-${type}${ops.length + 1}`, databaseId, type, status: "running", startedAt: timestampFromDate(T0) });
    state.operations.set(databaseId, ops);
  };
  return {
    async listBackups(req) {
      record(state, "listBackups", req);
      await find(req.organizationId, req.databaseId);
      const held = state.backups.get(req.databaseId) ?? { backups: [], archiveError: "" };
      const start = (req.page - 1) * req.perPage;
      return {
        backups: held.backups.slice(start, start + req.perPage),
        total: held.backups.length,
        page: req.page,
        perPage: req.perPage,
        earliestRestoreTime: held.earliest && timestampFromDate(held.earliest),
        latestRestoreTime: held.latest && timestampFromDate(held.latest),
        archiveError: held.archiveError,
      };
    },
    async createBackup(req) {
      record(state, "createBackup", req);
      const { db } = await find(req.organizationId, req.databaseId);
      if (db.status !== "running") throw conflict(`cannot back up a database that is ${db.status}`);
      const held = state.backups.get(req.databaseId) ?? { backups: [], archiveError: "" };
      if (held.backups.some((b) => b.status === BackupStatus.RUNNING)) throw conflict("a backup is already running");
      const backup = create(BackupSchema, {
        id: `bkp-${db.id.slice(3)}n${held.backups.length + 1}`,
        databaseId: db.id,
        type: BackupType.MANUAL,
        status: BackupStatus.RUNNING,
        startedAt: timestampFromDate(T0),
      });
      held.backups.unshift(backup);
      state.backups.set(db.id, held);
      log(db.id, "backup");
      return { backup };
    },
    async restoreToTime(req) {
      record(state, "restoreToTime", req);
      const { db: source } = await find(req.organizationId, req.sourceDatabaseId);
      const held = state.backups.get(source.id);
      if (!held?.earliest || !held.latest) throw conflict("no completed backup yet");
      const at = req.restoreTime ? timestampDate(req.restoreTime) : held.latest;
      if (at < held.earliest || at > held.latest) {
        const window = `${held.earliest.toISOString()} to ${held.latest.toISOString()}`;
        throw invalidArgument([{ field: "restore_time", message: `must be within the restore window, ${window}` }]);
      }
      const taken = [...state.databases.values()].some((e) => e.db.organizationId === req.organizationId && e.db.name === req.name);
      if (taken) throw new ConnectError(`a database named "${req.name}" already exists`, Code.AlreadyExists);
      const res = newDatabase(state, {
        organizationId: req.organizationId,
        name: req.name,
        region: req.region || source.region,
        tier: req.tier || source.tier,
        version: source.version,
      });
      res.database.restoredFrom = create(RestoredFromSchema, { databaseId: source.id, restoreTime: timestampFromDate(at) });
      log(res.database.id, "restore");
      return res;
    },
  };
}
