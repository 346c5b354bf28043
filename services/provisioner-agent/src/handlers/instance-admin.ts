import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  InstanceDbSchema,
  type InstanceAdminService,
  InstanceExtensionSchema,
  InstanceLogEntrySchema,
  InstanceQueryStatSchema,
  InstanceRoleSchema,
} from "@dbaas/proto/instance-admin";
import type { AppContext } from "../context.ts";
import { createDb, dropDb, listDbs } from "../inside/dbs.ts";
import { dropExtension, installExtension, listExtensions, type ServerExtension } from "../inside/extensions.ts";
import { readLogs } from "../inside/logs.ts";
import { listQueryStats, resetQueryStats } from "../inside/query-stats.ts";
import { createRole, dropRole, endRoleSessions, listRoles, setRolePassword } from "../inside/roles.ts";
import type { LogEntry } from "../server-log/reader.ts";

const role = (r: { name: string; login: boolean; createDb: boolean; createRole: boolean }) => create(InstanceRoleSchema, r);
const extension = (e: ServerExtension) => create(InstanceExtensionSchema, e);
const db = (d: { name: string; owner: string; sizeBytes: bigint }) => create(InstanceDbSchema, d);
const logEntry = ({ time, ...e }: LogEntry) => create(InstanceLogEntrySchema, { ...e, time: timestampFromDate(time) });

/**
 * InstanceAdminService: the databases service's way inside one running server
 * (roles, logical databases), through the runtime's agent connection. Thin:
 * each call is one function of `inside/`.
 */
export function instanceAdmin(ctx: Pick<AppContext, "runtime" | "log">): Partial<ServiceImpl<typeof InstanceAdminService>> {
  const rt = ctx.runtime;
  return {
    listRoles: async (req) => ({ roles: (await listRoles(rt, req.databaseId)).map(role) }),
    createRole: async (req) => ({
      role: role(await createRole(rt, req.databaseId, { name: req.name, verifier: req.scramVerifier, maxRoles: req.maxRoles })),
    }),
    dropRole: async (req) => {
      await dropRole(rt, req.databaseId, req.name);
      ctx.log.info("role dropped", { database_id: req.databaseId, role: req.name });
      return {};
    },
    setRolePassword: async (req) => {
      const out = await setRolePassword(rt, req.databaseId, { name: req.name, verifier: req.scramVerifier });
      ctx.log.info("role password replaced", { database_id: req.databaseId, role: req.name, sessions_ended: out.sessionsEnded });
      return out;
    },
    endRoleSessions: async (req) => ({ sessionsEnded: await endRoleSessions(rt, req.databaseId, { name: req.name, walLsn: req.walLsn }) }),
    listDbs: async (req) => ({ dbs: (await listDbs(rt, req.databaseId)).map(db) }),
    createDb: async (req) => ({ db: db(await createDb(rt, req.databaseId, { name: req.name, owner: req.owner, maxDbs: req.maxDbs })) }),
    dropDb: async (req) => {
      await dropDb(rt, req.databaseId, req.name);
      return {};
    },
    listExtensions: async (req) => ({ extensions: (await listExtensions(rt, req.databaseId, req.db)).map(extension) }),
    installExtension: async (req) => {
      const installed = await installExtension(rt, req.databaseId, req.db, req.name);
      ctx.log.info("extension installed", { database_id: req.databaseId, db: req.db, extension: req.name });
      return { extension: extension(installed) };
    },
    dropExtension: async (req) => {
      await dropExtension(rt, req.databaseId, req.db, req.name);
      ctx.log.info("extension dropped", { database_id: req.databaseId, db: req.db, extension: req.name });
      return {};
    },
    readLogs: async (req) => {
      const page = await readLogs(rt, req.databaseId, {
        ...(req.since && { since: timestampDate(req.since) }),
        ...(req.until && { until: timestampDate(req.until) }),
        minSeverity: req.minSeverity,
        q: req.q,
        limit: req.limit,
        cursor: req.cursor,
      });
      return { entries: page.entries.map(logEntry), nextCursor: page.nextCursor, prevCursor: page.prevCursor };
    },
    listQueryStats: async (req) => {
      const out = await listQueryStats(rt, req.databaseId, { orderBy: req.orderBy, limit: req.limit });
      return {
        stats: out.stats.map((s) => create(InstanceQueryStatSchema, s)),
        ...(out.statsReset && { statsReset: timestampFromDate(out.statsReset) }),
      };
    },
    resetQueryStats: async (req) => {
      await resetQueryStats(rt, req.databaseId);
      ctx.log.info("query statistics reset", { database_id: req.databaseId });
      return {};
    },
  };
}
