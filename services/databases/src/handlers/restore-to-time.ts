import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { conflict, invalidArgument, notFound, Validator } from "@dbaas/kit";
import { RestoreToTimeResponseSchema, type RestoreToTimeRequest, type RestoreToTimeResponse } from "@dbaas/proto/databases";
import { restorable } from "../backups.ts";
import type { AppContext } from "../context.ts";
import { windowOf } from "../db/backups.ts";
import { findOwned } from "../db/databases.ts";
import { configFitsTier } from "../inside/config.ts";
import { provisionDatabase, validateNewDatabase } from "../new-database.ts";

/**
 * A NEW database from the backups and archived WAL of the organization's
 * database `source_database_id`, holding exactly the transactions committed up
 * to `restore_time` (default: the latest restorable instant). Made as
 * CreateDatabase makes one — name rules, allowance, placement, its own
 * password — with the source's version, and its tier and region unless given.
 */
export function restoreToTime(ctx: AppContext) {
  return async (req: RestoreToTimeRequest): Promise<RestoreToTimeResponse> => {
    const source = await findOwned(ctx.pool, req.organizationId, req.sourceDatabaseId);
    if (!source) throw notFound("database");
    const window = restorable(await windowOf(ctx.pool, source.id));
    if (!window) throw conflict("the database has no completed backup yet; take one (or wait for the first) and try again");

    const region = req.region || source.region;
    const tier = req.tier || source.tier;
    const v = new Validator();
    const name = validateNewDatabase(v, { organizationId: req.organizationId, name: req.name, region, tier });
    const restoreTime = req.restoreTime ? timestampDate(req.restoreTime) : window.latest;
    const outside = restoreTime < window.earliest || restoreTime > window.latest;
    const span = `${window.earliest.toISOString()} to ${window.latest.toISOString()}`;
    if (outside) v.add("restore_time", `must be within the restore window, ${span}`);
    // A restore starts with the source's configuration: it must fit the restore's tier.
    for (const m of await configFitsTier(ctx, source.id, tier)) v.add(m.field, m.message);
    if (v.violations.length > 0) {
      throw invalidArgument(v.violations, outside ? `restore_time is outside the restore window, ${span}` : undefined);
    }

    const answer = await provisionDatabase(ctx, {
      organizationId: req.organizationId,
      name,
      region,
      tier,
      version: source.version,
      operation: "restore",
      restoredFrom: { databaseId: source.id, restoreTime },
    });
    return create(RestoreToTimeResponseSchema, answer);
  };
}
