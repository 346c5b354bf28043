import { create } from "@bufbuild/protobuf";
import { REGIONS, TIERS } from "@dbaas/catalogue";
import {
  ListRegionsResponseSchema,
  ListTiersResponseSchema,
  ListVersionsResponseSchema,
  RegionSchema,
  TierSchema,
  VersionSchema,
  type ListRegionsResponse,
  type ListTiersResponse,
  type ListVersionsResponse,
} from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { availableVersions } from "../db/agents.ts";

export function listRegions() {
  return async (): Promise<ListRegionsResponse> =>
    create(ListRegionsResponseSchema, { regions: REGIONS.map((r) => create(RegionSchema, r)) });
}

export function listTiers() {
  return async (): Promise<ListTiersResponse> =>
    create(ListTiersResponseSchema, {
      tiers: TIERS.map((t) =>
        create(TierSchema, {
          name: t.name,
          vcpu: t.vcpu,
          memoryGb: t.memoryGb,
          storageGb: t.storageGb,
          hourlyPrice: t.hourlyPrice,
        }),
      ),
    });
}

/** The versions whose server binaries a registered agent has, newest first, the configured default flagged. */
export function listVersions(ctx: AppContext) {
  return async (): Promise<ListVersionsResponse> => {
    const versions = await availableVersions(ctx.pool);
    return create(ListVersionsResponseSchema, {
      versions: versions.map((v) => create(VersionSchema, { version: v, isDefault: v === ctx.cfg.defaultVersion })),
    });
  };
}
