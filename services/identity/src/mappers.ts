import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ApiKeySchema,
  InvitationSchema,
  MemberSchema,
  OrganizationSchema,
  UserSchema,
  type ApiKey,
  type Invitation,
  type Member,
  type Organization,
} from "@dbaas/proto/identity";
import { roleToProto, type RoleName } from "./authz.ts";

export interface OrganizationRow {
  id: string;
  name: string;
  plan: string;
  created_at: Date;
}

export const ORGANIZATION_COLUMNS = "id, name, plan, created_at";

export function organizationToProto(row: OrganizationRow): Organization {
  return create(OrganizationSchema, {
    id: row.id,
    name: row.name,
    plan: row.plan,
    createdAt: timestampFromDate(row.created_at),
  });
}

export interface ApiKeyRow {
  id: string;
  name: string;
  scopes: string[];
  prefix: string;
  created_by: string;
  role: RoleName;
  created_at: Date;
  expires_at: Date | null;
}

export const API_KEY_COLUMNS = "id, name, scopes, prefix, created_by, role, created_at, expires_at";

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

export interface MemberRow {
  id: string;
  user_id: string;
  email: string;
  name: string;
  role: RoleName;
  created_at: Date;
}

/** Selects MemberRow columns from `memberships m JOIN users u`. */
export const MEMBER_COLUMNS = "m.id, m.user_id, u.email, u.name, m.role, m.created_at";

export function memberToProto(row: MemberRow): Member {
  return create(MemberSchema, {
    id: row.id,
    user: create(UserSchema, { id: row.user_id, email: row.email, name: row.name }),
    role: roleToProto(row.role),
    joinedAt: timestampFromDate(row.created_at),
  });
}

export interface InvitationRow {
  id: string;
  email: string;
  role: RoleName;
  status: string;
  invited_by: string;
  created_at: Date;
  expires_at: Date;
}

export const INVITATION_COLUMNS = "id, email, role, status, invited_by, created_at, expires_at";

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
