import { DbaasClient } from "./client.ts";
import { ApiKeys, Auth, Organization } from "./resources/account.ts";
import { Billing, Catalogue } from "./resources/billing.ts";
import { Backups, Databases } from "./resources/databases.ts";
import { Pooler, TrustedSources } from "./resources/edge.ts";
import { Config, Dbs, Extensions, Logs, Queries, Roles } from "./resources/inside.ts";
import { Replicas } from "./resources/replicas.ts";
import type { PageIterator } from "./pages.ts";
import type { OperationId, Query } from "./types.ts";

/**
 * The method that performs each operation of the API, by `operationId`. The
 * type makes tsc fail when the document gains an operation this client lacks;
 * test/sdks/contract.test.ts checks the same against the served document for
 * the three clients.
 */
export const OPERATIONS: Record<OperationId, (...args: never[]) => unknown> = {
  signup: Auth.prototype.signup,
  token: Auth.prototype.login,
  acceptInvitation: Auth.prototype.acceptInvitation,
  openApi: DbaasClient.prototype.getOpenApiDocument,

  createDatabase: Databases.prototype.create,
  listDatabases: Databases.prototype.list,
  getDatabase: Databases.prototype.get,
  updateDatabase: Databases.prototype.update,
  deleteDatabase: Databases.prototype.delete,
  startDatabase: Databases.prototype.start,
  stopDatabase: Databases.prototype.stop,
  restartDatabase: Databases.prototype.restart,
  resizeDatabase: Databases.prototype.resize,
  resetPassword: Databases.prototype.resetPassword,
  listOperations: Databases.prototype.listOperations,
  getMetrics: Databases.prototype.getMetrics,
  getCaCertificate: Databases.prototype.getCaCertificate,
  listBackups: Backups.prototype.list,
  createBackup: Backups.prototype.create,
  restoreDatabase: Backups.prototype.restore,
  listReplicas: Replicas.prototype.list,
  createReplica: Replicas.prototype.create,
  getReplica: Replicas.prototype.get,
  deleteReplica: Replicas.prototype.delete,
  promoteReplica: Replicas.prototype.promote,
  listTrustedSources: TrustedSources.prototype.list,
  createTrustedSource: TrustedSources.prototype.add,
  deleteTrustedSource: TrustedSources.prototype.remove,
  getPooler: Pooler.prototype.get,
  updatePooler: Pooler.prototype.update,
  getHighAvailability: Databases.prototype.getHighAvailability,
  setHighAvailability: Databases.prototype.setHighAvailability,
  failover: Databases.prototype.failover,
  listRoles: Roles.prototype.list,
  createRole: Roles.prototype.create,
  deleteRole: Roles.prototype.delete,
  resetRolePassword: Roles.prototype.resetPassword,
  listDbs: Dbs.prototype.list,
  createDb: Dbs.prototype.create,
  deleteDb: Dbs.prototype.delete,
  getConfig: Config.prototype.get,
  updateConfig: Config.prototype.update,
  listExtensions: Extensions.prototype.list,
  installExtension: Extensions.prototype.install,
  deleteExtension: Extensions.prototype.delete,
  listLogs: Logs.prototype.list,
  listQueries: Queries.prototype.list,
  resetQueries: Queries.prototype.reset,
  listRegions: Catalogue.prototype.listRegions,
  listTiers: Catalogue.prototype.listTiers,
  listVersions: Catalogue.prototype.listVersions,

  getUsage: Billing.prototype.getUsage,
  listPaymentMethods: Billing.prototype.listPaymentMethods,
  addPaymentMethod: Billing.prototype.addPaymentMethod,
  updatePaymentMethod: Billing.prototype.updatePaymentMethod,
  deletePaymentMethod: Billing.prototype.deletePaymentMethod,
  listInvoices: Billing.prototype.listInvoices,
  getInvoicePdf: Billing.prototype.getInvoicePdf,
  createAlert: Billing.prototype.createAlert,
  listAlerts: Billing.prototype.listAlerts,
  deleteAlert: Billing.prototype.deleteAlert,

  getOrganization: Organization.prototype.get,
  updateOrganization: Organization.prototype.update,
  deleteOrganization: Organization.prototype.delete,
  listMembers: Organization.prototype.listMembers,
  inviteMember: Organization.prototype.inviteMember,
  updateMember: Organization.prototype.updateMember,
  removeMember: Organization.prototype.removeMember,
  listInvitations: Organization.prototype.listInvitations,
  cancelInvitation: Organization.prototype.cancelInvitation,
  transferOwnership: Organization.prototype.transferOwnership,

  listApiKeys: ApiKeys.prototype.list,
  createApiKey: ApiKeys.prototype.create,
  revokeApiKey: ApiKeys.prototype.revoke,
};

/** The operations whose answer is one page of a list (they take a `page` query parameter). */
export type PagedOperationId = {
  [K in OperationId]: [Query<K>] extends [never] ? never : "page" extends keyof Query<K> ? K : never;
}[OperationId];

/**
 * The list method of each paged operation: its return type makes tsc fail
 * when one answers a plain promise instead of a `PageIterator` (`await` for a
 * page, `for await` for every item); test/sdks/contract.test.ts checks the
 * keys against the document, and that the three clients iterate them all.
 */
export const PAGED: Record<PagedOperationId, (...args: never[]) => PageIterator<unknown>> = {
  listDatabases: Databases.prototype.list,
  listOperations: Databases.prototype.listOperations,
  listBackups: Backups.prototype.list,
  listReplicas: Replicas.prototype.list,
  listTrustedSources: TrustedSources.prototype.list,
  listRoles: Roles.prototype.list,
  listDbs: Dbs.prototype.list,
  listExtensions: Extensions.prototype.list,
  listPaymentMethods: Billing.prototype.listPaymentMethods,
  listInvoices: Billing.prototype.listInvoices,
  listAlerts: Billing.prototype.listAlerts,
  listMembers: Organization.prototype.listMembers,
  listInvitations: Organization.prototype.listInvitations,
  listApiKeys: ApiKeys.prototype.list,
};
