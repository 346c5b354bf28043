import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { InsideService } from "@dbaas/proto/inside";
import type { AppContext } from "../context.ts";
import { getConfig, updateConfig } from "../inside/config.ts";
import { createDb, deleteDb, listDbs } from "../inside/dbs.ts";
import { deleteExtension, installExtension, listExtensions } from "../inside/extensions.ts";
import { listLogs, listQueries, resetQueries } from "../inside/logs.ts";
import { createRole, deleteRole, listRoles, resetRolePassword } from "../inside/roles.ts";

/** InsideService (docs/product.md, Inside the database): thin, each call one function of `inside/`. */
export function inside(ctx: AppContext): Partial<ServiceImpl<typeof InsideService>> {
  return {
    listRoles: (req) => listRoles(ctx, req),
    createRole: (req) => createRole(ctx, req),
    deleteRole: async (req) => {
      await deleteRole(ctx, req);
      return {};
    },
    resetRolePassword: (req, handlerCtx: HandlerContext) => resetRolePassword(ctx, req, handlerCtx),
    listDbs: (req) => listDbs(ctx, req),
    createDb: (req) => createDb(ctx, req),
    deleteDb: async (req) => {
      await deleteDb(ctx, req);
      return {};
    },
    getConfig: (req) => getConfig(ctx, req),
    listExtensions: (req) => listExtensions(ctx, req),
    installExtension: (req) => installExtension(ctx, req),
    deleteExtension: async (req) => {
      await deleteExtension(ctx, req);
      return {};
    },
    updateConfig: (req, handlerCtx: HandlerContext) => updateConfig(ctx, req, handlerCtx),
    listLogs: (req) => listLogs(ctx, req),
    listQueries: (req) => listQueries(ctx, req),
    resetQueries: async (req) => {
      await resetQueries(ctx, req);
      return {};
    },
  };
}
