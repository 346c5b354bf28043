import { describe, expect, it } from "vitest";
import { Role } from "@dbaas/proto/identity";
import { effectivePermissions, roleScopes, roleToProto, SCOPES } from "../src/authz.ts";

describe("role matrix (docs/product.md, Roles and permissions)", () => {
  it("gives the owner every scope", () => {
    expect(roleScopes("owner")).toEqual([...SCOPES]);
    expect(SCOPES).toHaveLength(10);
  });

  it("gives the admin everything but billing:write and organization:delete", () => {
    expect(roleScopes("admin")).toEqual([
      "databases:read",
      "databases:write",
      "backups:write",
      "metrics:read",
      "members:read",
      "members:write",
      "settings:write",
      "billing:read",
    ]);
  });

  it("lets the developer manage databases and backups but not members, settings or billing", () => {
    expect(roleScopes("developer")).toEqual(["databases:read", "databases:write", "backups:write", "metrics:read", "members:read"]);
  });

  it("keeps the viewer read-only", () => {
    expect(roleScopes("viewer")).toEqual(["databases:read", "metrics:read", "members:read"]);
  });

  it("intersects the role with the credential's scopes", () => {
    expect(effectivePermissions("viewer", ["databases:read", "databases:write"])).toEqual(["databases:read"]);
    expect(effectivePermissions("owner", ["billing:write", "metrics:read"])).toEqual(["metrics:read", "billing:write"]);
    expect(effectivePermissions("admin", [])).toEqual([]);
  });

  it("maps role names onto the proto enum", () => {
    expect([roleToProto("owner"), roleToProto("admin"), roleToProto("developer"), roleToProto("viewer")]).toEqual([
      Role.OWNER,
      Role.ADMIN,
      Role.DEVELOPER,
      Role.VIEWER,
    ]);
  });
});
