import { document } from "../middleware/envelope.ts";
import { openApiDocument } from "./openapi.ts";
import { protectedRoute, publicRoute, type Route } from "./route.ts";
import * as apiKeys from "./v1/api-keys.ts";
import * as auth from "./v1/auth.ts";
import * as billing from "./v1/billing.ts";
import * as databases from "./v1/databases.ts";
import * as organization from "./v1/organization.ts";

/**
 * Every public route, who may call it, and what it accepts. The app mounts
 * exactly these (anything else is 404/405), so a route cannot exist without
 * saying which permission it needs or that it is public.
 *
 * API keys are organization credentials that outlive their creator, so
 * managing them counts as changing the organization's settings. Every member
 * may see the organization, its members and its pending invitations
 * (members:read); transferring ownership and deleting the organization are
 * further restricted by identity to the owner.
 */
export const ROUTES: readonly Route[] = [
  publicRoute({
    method: "POST",
    path: "/v1/auth/signup",
    summary: "Create a user and an organization (plan free) owned by it; returns a token.",
    success: 201,
    body: auth.signupBody,
    handler: auth.signup,
  }),
  publicRoute({
    method: "POST",
    path: "/v1/auth/token",
    summary: "Log in with e-mail and password.",
    success: 200,
    body: auth.tokenBody,
    handler: auth.token,
  }),
  publicRoute({
    method: "POST",
    path: "/v1/invitations/accept",
    summary: "Accept an invitation with its one-time token: join (creating the user if new) and get a token.",
    success: 201,
    body: organization.acceptBody,
    handler: organization.acceptInvitation,
  }),
  publicRoute({
    method: "GET",
    path: "/v1/openapi.json",
    summary: "This API's OpenAPI 3.1 description, generated from this table.",
    success: 200,
    handler: async function openApi({ ctx }) {
      return document(openApiDocument(ROUTES, ctx.config.publicBaseUrl));
    },
  }),

  protectedRoute({
    method: "POST",
    path: "/v1/databases",
    summary: "Create a database; the response carries its password, shown this once.",
    permission: "databases:write",
    success: 201,
    body: databases.createBody,
    handler: databases.createDatabase,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases",
    summary: "List the organization's databases.",
    permission: "databases:read",
    success: 200,
    query: databases.listQuery,
    handler: databases.listDatabases,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id",
    summary: "Get a database (the connection string's password masked).",
    permission: "databases:read",
    success: 200,
    handler: databases.getDatabase,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/databases/:id",
    summary: "Rename a database.",
    permission: "databases:write",
    success: 200,
    body: databases.updateBody,
    handler: databases.updateDatabase,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/databases/:id",
    summary: "Delete a database (data retained 7 days).",
    permission: "databases:write",
    success: 204,
    handler: databases.deleteDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/start",
    summary: "Start a stopped database.",
    permission: "databases:write",
    success: 200,
    handler: databases.startDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/stop",
    summary: "Stop a running database (compute billing stops).",
    permission: "databases:write",
    success: 200,
    handler: databases.stopDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/restart",
    summary: "Restart a running database.",
    permission: "databases:write",
    success: 200,
    handler: databases.restartDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/resize",
    summary: "Move a database to another tier.",
    permission: "databases:write",
    success: 200,
    body: databases.resizeBody,
    handler: databases.resizeDatabase,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/databases/:id/reset-password",
    summary: "Replace the password; the old one stops working at once.",
    permission: "databases:write",
    success: 200,
    handler: databases.resetPassword,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/operations",
    summary: "List the operations run on a database.",
    permission: "databases:read",
    success: 200,
    query: databases.operationsQuery,
    handler: databases.listOperations,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/databases/:id/ca-certificate",
    summary: "The CA certificate that signs the database's server certificate (PEM).",
    permission: "databases:read",
    success: 200,
    produces: "application/x-pem-file",
    handler: databases.getCaCertificate,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/regions",
    summary: "Regions a database can be created in.",
    permission: "databases:read",
    success: 200,
    handler: databases.listRegions,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/tiers",
    summary: "Instance tiers and their hourly prices (USD).",
    permission: "databases:read",
    success: 200,
    handler: databases.listTiers,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/versions",
    summary: "PostgreSQL versions a database can run.",
    permission: "databases:read",
    success: 200,
    handler: databases.listVersions,
  }),

  protectedRoute({
    method: "GET",
    path: "/v1/billing/usage",
    summary: "Month-to-date usage and its price.",
    permission: "billing:read",
    success: 200,
    handler: billing.getUsage,
  }),

  protectedRoute({
    method: "GET",
    path: "/v1/organization",
    summary: "The caller's organization: id, name, plan.",
    permission: "members:read",
    success: 200,
    handler: organization.getOrganization,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/organization",
    summary: "Rename the organization; changing the plan also needs billing:write.",
    permission: "settings:write",
    success: 200,
    body: organization.updateOrganizationBody,
    handler: organization.updateOrganization,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization",
    summary: "Delete the organization, its members, invitations and API keys; only without live databases.",
    permission: "organization:delete",
    success: 204,
    handler: organization.deleteOrganization,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/organization/members",
    summary: "List the organization's members.",
    permission: "members:read",
    success: 200,
    query: organization.listQuery,
    handler: organization.listMembers,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/organization/members",
    summary: "Invite someone by e-mail; returns the pending invitation (valid 7 days).",
    permission: "members:write",
    success: 201,
    body: organization.inviteBody,
    handler: organization.inviteMember,
  }),
  protectedRoute({
    method: "PATCH",
    path: "/v1/organization/members/:id",
    summary: "Change a member's role (never the owner's, never to owner).",
    permission: "members:write",
    success: 200,
    body: organization.updateMemberBody,
    handler: organization.updateMember,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization/members/:id",
    summary: "Remove a member: their sessions end at once; API keys they created stay until revoked.",
    permission: "members:write",
    success: 204,
    handler: organization.removeMember,
  }),
  protectedRoute({
    method: "GET",
    path: "/v1/organization/invitations",
    summary: "List invitations not yet accepted or cancelled (status pending or expired).",
    permission: "members:read",
    success: 200,
    query: organization.listQuery,
    handler: organization.listInvitations,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization/invitations/:id",
    summary: "Cancel an invitation; its link stops working.",
    permission: "members:write",
    success: 204,
    handler: organization.cancelInvitation,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/organization/transfer",
    summary: "Owner only: make another member owner (the caller becomes admin); needs the caller's password.",
    permission: "members:write",
    success: 200,
    body: organization.transferBody,
    handler: organization.transferOwnership,
  }),

  protectedRoute({
    method: "GET",
    path: "/v1/organization/api-keys",
    summary: "List the organization's API keys (never their secrets).",
    permission: "settings:write",
    success: 200,
    query: apiKeys.listQuery,
    handler: apiKeys.listApiKeys,
  }),
  protectedRoute({
    method: "POST",
    path: "/v1/organization/api-keys",
    summary: "Create an API key; the secret is in this response only.",
    permission: "settings:write",
    success: 201,
    body: apiKeys.createBody,
    handler: apiKeys.createApiKey,
  }),
  protectedRoute({
    method: "DELETE",
    path: "/v1/organization/api-keys/:id",
    summary: "Revoke an API key at once.",
    permission: "settings:write",
    success: 204,
    handler: apiKeys.revokeApiKey,
  }),
];

