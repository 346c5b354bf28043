import type { ConnectRouter } from "@connectrpc/connect";
import { AgentService } from "@dbaas/proto/agent";
import { DatabasesService } from "@dbaas/proto/databases";
import { InsideService } from "@dbaas/proto/inside";
import type { AppContext } from "./context.ts";
import { registerAgent, renewLeases, reportBackups, reportInstances } from "./handlers/agents.ts";
import { createBackup, listBackups } from "./handlers/backups.ts";
import { getCaCertificate } from "./handlers/ca-certificate.ts";
import { listRegions, listTiers, listVersions } from "./handlers/catalogue.ts";
import { createDatabase } from "./handlers/create-database.ts";
import { deleteDatabase, restoreDatabase } from "./handlers/delete-restore.ts";
import { getDatabases } from "./handlers/get-databases.ts";
import { getMetrics } from "./handlers/get-metrics.ts";
import { failover, getHighAvailability, setHighAvailability } from "./handlers/high-availability.ts";
import { inside } from "./handlers/inside.ts";
import { listDatabases } from "./handlers/list-databases.ts";
import { listOperations } from "./handlers/operations.ts";
import { reportSamples } from "./handlers/report-samples.ts";
import { createReplica, deleteReplica, getReplica, listReplicas, promoteReplica } from "./handlers/replicas.ts";
import { resetPassword } from "./handlers/reset-password.ts";
import { restoreToTime } from "./handlers/restore-to-time.ts";
import { resizeDatabase, restartDatabase, startDatabase, stopDatabase } from "./handlers/start-stop-resize.ts";
import { updateDatabase } from "./handlers/update-database.ts";
import { watchAssignments } from "./handlers/watch-assignments.ts";
import { createTrustedSource, deleteTrustedSource, getPooler, listTrustedSources, updatePooler } from "./edge.ts";

export const routes = (ctx: AppContext) => (router: ConnectRouter) => {
  const { getDatabase, batchGetDatabases } = getDatabases(ctx);
  router.service(DatabasesService, {
    createDatabase: createDatabase(ctx),
    getDatabase,
    batchGetDatabases,
    listDatabases: listDatabases(ctx),
    updateDatabase: updateDatabase(ctx),
    deleteDatabase: deleteDatabase(ctx),
    restoreDatabase: restoreDatabase(ctx),
    startDatabase: startDatabase(ctx),
    stopDatabase: stopDatabase(ctx),
    restartDatabase: restartDatabase(ctx),
    resizeDatabase: resizeDatabase(ctx),
    resetPassword: resetPassword(ctx),
    listOperations: listOperations(ctx),
    listBackups: listBackups(ctx),
    createBackup: createBackup(ctx),
    restoreToTime: restoreToTime(ctx),
    getMetrics: getMetrics(ctx),
    createReplica: createReplica(ctx),
    listReplicas: listReplicas(ctx),
    getReplica: getReplica(ctx),
    deleteReplica: deleteReplica(ctx),
    promoteReplica: promoteReplica(ctx),
    listTrustedSources: listTrustedSources(ctx),
    createTrustedSource: createTrustedSource(ctx),
    deleteTrustedSource: deleteTrustedSource(ctx),
    getPooler: getPooler(ctx),
    updatePooler: updatePooler(ctx),
    getHighAvailability: getHighAvailability(ctx),
    setHighAvailability: setHighAvailability(ctx),
    failover: failover(ctx),
    getCaCertificate: getCaCertificate(ctx),
    listRegions: listRegions(),
    listTiers: listTiers(),
    listVersions: listVersions(ctx),
  });
  router.service(InsideService, inside(ctx));
  router.service(AgentService, {
    registerAgent: registerAgent(ctx),
    watchAssignments: watchAssignments(ctx),
    reportInstances: reportInstances(ctx),
    reportBackups: reportBackups(ctx),
    reportSamples: reportSamples(ctx),
    renewLeases: renewLeases(ctx),
  });
};
