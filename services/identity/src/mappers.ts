import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PLAN } from "@dbaas/catalogue";
import {
  ApiKeySchema,
  InvitationSchema,
  MemberSchema,
  OrganizationSchema,
  Plan,
  UserSchema,
  type ApiKey,
  type Invitation,
  type Member,
  type Organization,
} from "@dbaas/proto/identity";
import { roleToProto } from "./authz.ts";
import type { ApiKeyRow } from "./db/api-keys.ts";
import type { InvitationRow } from "./db/invitations.ts";
import type { MemberRow } from "./db/memberships.ts";
import type { OrganizationRow } from "./db/organizations.ts";

/**
 * Rows as the proto messages carry them. The vocabularies crossing the wire
 * (plan, role) go through the catalogue's one mapping (services/catalogue/src/vocabulary.ts);
 * a plan is written both as the enum and, for callers that predate it, by name.
 */

/** The proto plan of a stored plan name. */
export function planToProto(plan: string): Plan {
  return PLAN.value(plan) ?? Plan.UNSPECIFIED;
}

export function organizationToProto(row: OrganizationRow): Organization {
  return create(OrganizationSchema, {
    id: row.id,
    name: row.name,
    plan: row.plan,
    planEnum: planToProto(row.plan),
    createdAt: timestampFromDate(row.created_at),
  });
}

export function apiKeyToProto(row: ApiKeyRow): ApiKey {
  return create(ApiKeySchema, {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    prefix: row.prefix,
    createdBy: row.created_by,
    role: roleToProto(row.role),
    createdAt: timestampFromDate(row.created_at),
    expiresAt: row.expires_at ? timestampFromDate(row.expires_at) : undefined,
  });
}

export function memberToProto(row: MemberRow): Member {
  return create(MemberSchema, {
    id: row.id,
    user: create(UserSchema, { id: row.user_id, email: row.email, name: row.name }),
    role: roleToProto(row.role),
    joinedAt: timestampFromDate(row.created_at),
  });
}

/**
 * A pending invitation past its expiry is shown as expired; the row keeps
 * status pending until a new invitation of the address supersedes it.
 */
export function invitationToProto(row: InvitationRow, now: Date): Invitation {
  const expired = row.status === "expired" || (row.status === "pending" && row.expires_at.getTime() <= now.getTime());
  return create(InvitationSchema, {
    id: row.id,
    email: row.email,
    role: roleToProto(row.role),
    status: expired ? "expired" : row.status,
    invitedBy: row.invited_by,
    createdAt: timestampFromDate(row.created_at),
    expiresAt: timestampFromDate(row.expires_at),
  });
}
