import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ApiKeySchema, OrganizationSchema, type ApiKey, type Organization } from "@dbaas/proto/identity";
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
