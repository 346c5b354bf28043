import { document } from "../middleware/envelope.ts";
import { ID } from "./ids.ts";
import { openApiDocument } from "./openapi.ts";
import { fileOf, json, listOf, NO_CONTENT, protectedRoute, publicRoute, type Route } from "./route.ts";
import { BILLING_ROUTES } from "./table-billing.ts";
import { EDGE_ROUTES } from "./table-edge.ts";
import { HIGH_AVAILABILITY_ROUTES } from "./table-high-availability.ts";
import { INSIDE_ROUTES } from "./table-inside.ts";
import { REPLICA_ROUTES } from "./table-replicas.ts";
import * as apiKeys from "./v1/api-keys.ts";
import * as auth from "./v1/auth.ts";
import * as backups from "./v1/backups.ts";
import * as databases from "./v1/databases.ts";
import * as metrics from "./v1/metrics.ts";
import * as organization from "./v1/organization.ts";

/**
 * Every public route, who may call it, and what it accepts (billing's are in
 * table-billing.ts, read replicas' in table-replicas.ts, high availability's in table-high-availability.ts). The app mounts exactly these (anything else is 404/405),
 * so a route cannot exist without saying which permission it needs or that
 * it is public.
 *
 * Every member may see the organization, its members and its pending
 * invitations (members:read); transferring ownership and deleting the
 * organization are further restricted by identity to the owner. API keys are
 * for every member too (docs/product.md, Identity), so their routes need what every
 * role holds, members:read: a member manages their own credentials. Identity
 * decides the rest from the caller's permissions: scopes capped by the
 * credential and the creator's role, and settings:write (owner, admin) to see
 * and revoke everyone's keys.
 */
export const ROUTES: readonly Route[] = [
  publicRoute({
    method: "POST",
    path: "/v1/auth/signup",
    summary: "Create a user and an organization (plan free) owned by it; returns a token.",
    response: json(201, "Signup"),
    body: auth.signupBody,
    handler: auth.signup,
  }),
  publicRoute({
    method: "POST",
    path: "/v1/auth/token",
    summary: "Log in with e-mail and password.",
    response: json(200, "Token"),
    errors: [401, 403, 404],
    body: auth.tokenBody,
    handler: auth.token,
  }),
  publicRoute({
    method: "POST",
    path: "/v1/invitations/accept",
    summary: "Accept an invitation with its one-time token: join (creating the user if new) and get a token.",
    response: json(201, "Acceptance"),
    errors: [401, 404],
    body: organization.acceptBody,
    handler: organization.acceptInvitation,
  }),
  publicRoute({
    method: "GET",
    path: "/v1/openapi.json",
    summary: "This API's OpenAPI 3.1 description, generated from this table.",
    response: { status: 200, document: "OpenApiDocument" },
    handler: async function openApi({ ctx }) {
      return document(openApiDocument(ROUTES, ctx.config.publicBaseUrl));
    },
  }),

  protectedRoute({
    method: "POST",
    path: "/v1/databases",
    summary: "Create a database; the response carries its password, shown this once.",
    permission: "databases:write",
    response: json(201, "CreatedDatabase"),
    errors: [402],
    body: databases.createBody,
    handler: databases.createDatabase,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases",
    summary: "List the organization's databases.",
    permission: "databases:read",
    response: listOf("databases", "DatabaseListItem"),
    query: databases.listQuery,
    handler: databases.listDatabases,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id",
    params: { id: ID.database },
    summary: "Get a database (the connection string's password masked).",
    permission: "databases:read",
    response: json(200, "Database"),
    handler: databases.getDatabase,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/databases/:id",
    params: { id: ID.database },
    summary: "Rename a database.",
    permission: "databases:write",
    response: json(200, "Database"),
    errors: [409],
    body: databases.updateBody,
    handler: databases.updateDatabase,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/databases/:id",
    params: { id: ID.database },
    summary: "Delete a database (data retained 7 days).",
    permission: "databases:write",
    response: NO_CONTENT,
    handler: databases.deleteDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/start",
    params: { id: ID.database },
    summary: "Start a stopped database.",
    permission: "databases:write",
    response: json(200, "DatabaseStatus"),
    errors: [402],
    handler: databases.startDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/stop",
    params: { id: ID.database },
    summary: "Stop a running database (compute billing stops).",
    permission: "databases:write",
    response: json(200, "DatabaseStatus"),
    handler: databases.stopDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/restart",
    params: { id: ID.database },
    summary: "Restart a running database.",
    permission: "databases:write",
    response: json(200, "DatabaseStatus"),
    handler: databases.restartDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/resize",
    params: { id: ID.database },
    summary: "Move a database to another tier.",
    permission: "databases:write",
    response: json(200, "ResizedDatabase"),
    errors: [402],
    body: databases.resizeBody,
    handler: databases.resizeDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/reset-password",
    params: { id: ID.database },
    summary: "Replace the password; the old one stops working at once.",
    permission: "databases:write",
    response: json(200, "Credentials"),
    handler: databases.resetPassword,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/operations",
    params: { id: ID.database },
    summary: "List the operations run on a database.",
    permission: "databases:read",
    response: listOf("operations", "Operation"),
    query: databases.operationsQuery,
    handler: databases.listOperations,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/backups",
    params: { id: ID.database },
    summary: "List a database's base backups, newest first, with its restore window and the state of WAL archiving.",
    permission: "databases:read",
    response: listOf("backups", "Backup", "RestoreWindow"),
    query: backups.listQuery,
    handler: backups.listBackups,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/backups",
    params: { id: ID.database },
    summary: "Take a base backup now (202, status running); one at a time, of a running database (409 otherwise).",
    permission: "backups:write",
    response: json(202, "Backup"),
    handler: backups.createBackup,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/restore",
    params: { id: ID.database },
    summary:
      "Restore to a point in time as a NEW database (own id, host, certificate and password, shown this once): " +
      "exactly the transactions committed up to restore_time. Counts against the free allowance like a create.",
    permission: "backups:write",
    response: json(201, "RestoredDatabase"),
    errors: [402],
    body: backups.restoreBody,
    handler: backups.restoreDatabase,
  }),
  ...REPLICA_ROUTES,
  ...EDGE_ROUTES,
  ...HIGH_AVAILABILITY_ROUTES,
  ...INSIDE_ROUTES,
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/metrics",
    params: { id: ID.database },
    summary:
      "A database's metrics over [start, end] (default: the last hour) at `step` seconds (default 60): one point per bucket with data. " +
      "1-minute points are kept 7 days, hourly ones 30 days.",
    permission: "metrics:read",
    response: json(200, "Metrics"),
    query: metrics.metricsQuery,
    handler: metrics.getMetrics,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/ca-certificate",
    params: { id: ID.database },
    summary: "The CA certificate that signs the database's server certificate (PEM).",
    permission: "databases:read",
    response: fileOf("application/x-pem-file"),
    handler: databases.getCaCertificate,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/regions",
    summary: "Regions a database can be created in.",
    permission: "databases:read",
    response: json(200, "Regions"),
    handler: databases.listRegions,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/tiers",
    summary: "Instance tiers and their hourly prices (USD).",
    permission: "databases:read",
    response: json(200, "Tiers"),
    handler: databases.listTiers,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/versions",
    summary: "PostgreSQL versions a database can run.",
    permission: "databases:read",
    response: json(200, "Versions"),
    handler: databases.listVersions,
  }),

  ...BILLING_ROUTES,

  protectedRoute({
    method: "GET",
    path: "/v1/organization",
    summary: "The caller's organization: id, name, plan.",
    permission: "members:read",
    response: json(200, "Organization"),
    errors: [404],
    handler: organization.getOrganization,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/organization",
    summary: "Rename the organization; changing the plan also needs billing:write.",
    permission: "settings:write",
    response: json(200, "Organization"),
    errors: [402, 404],
    body: organization.updateOrganizationBody,
    handler: organization.updateOrganization,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization",
    summary: "Delete the organization, its members, invitations and API keys; only without live databases.",
    permission: "organization:delete",
    response: NO_CONTENT,
    errors: [404, 409],
    handler: organization.deleteOrganization,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/organization/members",
    summary: "List the organization's members.",
    permission: "members:read",
    response: listOf("members", "Member"),
    query: organization.listQuery,
    handler: organization.listMembers,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/organization/members",
    summary: "Invite someone by e-mail; returns the pending invitation (valid 7 days).",
    permission: "members:write",
    response: json(201, "Invitation"),
    errors: [404],
    body: organization.inviteBody,
    handler: organization.inviteMember,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/organization/members/:id",
    params: { id: ID.member },
    summary: "Change a member's role (never the owner's, never to owner).",
    permission: "members:write",
    response: json(200, "Member"),
    errors: [409],
    body: organization.updateMemberBody,
    handler: organization.updateMember,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization/members/:id",
    params: { id: ID.member },
    summary: "Remove a member: their sessions end at once; API keys they created stay until revoked.",
    permission: "members:write",
    response: NO_CONTENT,
    errors: [409],
    handler: organization.removeMember,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/organization/invitations",
    summary: "List invitations not yet accepted or cancelled (status pending or expired).",
    permission: "members:read",
    response: listOf("invitations", "Invitation"),
    query: organization.listQuery,
    handler: organization.listInvitations,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization/invitations/:id",
    params: { id: ID.invitation },
    summary: "Cancel an invitation; its link stops working.",
    permission: "members:write",
    response: NO_CONTENT,
    handler: organization.cancelInvitation,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/organization/transfer",
    summary: "Owner only: make another member owner (the caller becomes admin); needs the caller's password.",
    permission: "members:write",
    response: json(200, "Transfer"),
    body: organization.transferBody,
    handler: organization.transferOwnership,
  }),

  protectedRoute({
    method: "GET",
    path: "/v1/organization/api-keys",
    summary: "List API keys (never their secrets): the caller's own; every key of the organization for owner and admin (settings:write).",
    permission: "members:read",
    response: listOf("api_keys", "ApiKey"),
    query: apiKeys.listQuery,
    handler: apiKeys.listApiKeys,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/organization/api-keys",
    summary:
      "Create an API key (any member), its scopes capped by the calling credential and the creator's role; the secret is in this response only.",
    permission: "members:read",
    response: json(201, "CreatedApiKey"),
    body: apiKeys.createBody,
    handler: apiKeys.createApiKey,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization/api-keys/:id",
    params: { id: ID.apiKey },
    summary: "Revoke an API key at once: one's own, or anyone's for owner and admin (settings:write).",
    permission: "members:read",
    response: NO_CONTENT,
    handler: apiKeys.revokeApiKey,
  }),
];
