import { create } from "@bufbuild/protobuf";
import { DatabaseStatus, DatabaseStatusSchema } from "@dbaas/proto/databases";
import { OrganizationSchema, Plan, PlanSchema, Role } from "@dbaas/proto/identity";
import { describe, expect, it } from "vitest";
import {
  DATABASE_RECORD_STATUSES,
  DATABASE_STATUS,
  DATABASE_STATUSES,
  PLAN,
  PLANS,
  ROLE,
  ROLES,
  SUPPORT_PLANS,
  TIER_NAMES,
  TIERS,
  tierSpec,
  vocabulary,
} from "../src/index.ts";

describe("vocabularies: the catalogue's names and the proto enums, one mapping", () => {
  it("maps every plan, role and database status both ways", () => {
    expect(SUPPORT_PLANS.map((n) => PLAN.value(n))).toEqual([Plan.FREE, Plan.PRO, Plan.ENTERPRISE, Plan.INTERNAL]);
    expect([Plan.FREE, Plan.PRO, Plan.ENTERPRISE, Plan.INTERNAL].map((p) => PLAN.name(p))).toEqual([...SUPPORT_PLANS]);
    expect(ROLES.map((n) => ROLE.value(n))).toEqual([Role.OWNER, Role.ADMIN, Role.DEVELOPER, Role.VIEWER]);
    expect(DATABASE_RECORD_STATUSES.map((n) => DATABASE_STATUS.name(DATABASE_STATUS.value(n)!))).toEqual([...DATABASE_RECORD_STATUSES]);
    expect(DATABASE_STATUS.value("running")).toBe(DatabaseStatus.RUNNING);
    expect(DATABASE_STATUS.value("past_due")).toBeUndefined();
    // What the API shows is the record's statuses less deleted and purged.
    expect(DATABASE_RECORD_STATUSES.filter((s) => !(DATABASE_STATUSES as readonly string[]).includes(s))).toEqual(["deleted", "purged"]);
    expect(PLANS.every((p) => SUPPORT_PLANS.includes(p))).toBe(true);
  });

  it("has no name for UNSPECIFIED, an unknown number or an unknown name", () => {
    expect(PLAN.name(Plan.UNSPECIFIED)).toBeUndefined();
    expect(PLAN.name(99 as Plan)).toBeUndefined();
    expect(ROLE.value("")).toBeUndefined();
    expect(ROLE.value("OWNER")).toBeUndefined();
    expect(PLAN.value("platinum")).toBeUndefined();
  });

  it("reads the enum field, and the deprecated string only while the enum is unset", () => {
    const both = create(OrganizationSchema, { plan: "free", planEnum: Plan.PRO });
    expect(PLAN.read(both.planEnum, both.plan)).toBe("pro");
    const old = create(OrganizationSchema, { plan: "enterprise" });
    expect(PLAN.read(old.planEnum, old.plan)).toBe("enterprise");
    expect(PLAN.read(Plan.UNSPECIFIED, "platinum")).toBeUndefined();
    expect(PLAN.read(Plan.UNSPECIFIED, "")).toBeUndefined();
  });

  it("refuses, when built, an enum and a list that do not match", () => {
    expect(() => vocabulary(PlanSchema, ["free", "pro", "enterprise"])).toThrow(/PLAN_INTERNAL has no name/);
    expect(() => vocabulary(DatabaseStatusSchema, [...DATABASE_RECORD_STATUSES, "sleeping"])).toThrow(/no value for sleeping/);
  });
});

describe("tiers", () => {
  it("one spec per tier name, in order", () => {
    expect(TIERS.map((t) => t.name)).toEqual([...TIER_NAMES]);
    expect(tierSpec("small")).toEqual({ name: "small", vcpu: 2, memoryGb: 4, storageGb: 40, hourlyPrice: 0.06, maxConnections: 100 });
  });
});
