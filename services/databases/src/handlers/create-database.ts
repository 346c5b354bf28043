import { create } from "@bufbuild/protobuf";
import { Validator } from "@dbaas/kit";
import { CreateDatabaseResponseSchema, type CreateDatabaseRequest, type CreateDatabaseResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { availableVersions } from "../db/agents.ts";
import { validateHighAvailability } from "../high-availability.ts";
import { provisionDatabase, validateNewDatabase } from "../new-database.ts";

/**
 * A new database, placed on an agent (with its standbys on others, when asked
 * for), provisioning until that agent reports it running; the answer carries
 * its password, which is never shown again.
 */
export function createDatabase(ctx: AppContext) {
  return async (req: CreateDatabaseRequest): Promise<CreateDatabaseResponse> => {
    const v = new Validator();
    const name = validateNewDatabase(v, req);
    const version = req.version === "" ? ctx.cfg.defaultVersion : req.version;
    v.oneOf("version", version, await availableVersions(ctx.pool));
    validateHighAvailability(v, req.standbys, req.synchronous);
    v.throwIfAny();
    const answer = await provisionDatabase(ctx, {
      organizationId: req.organizationId,
      name,
      region: req.region,
      tier: req.tier,
      version,
      operation: "create",
      standbys: req.standbys,
      synchronous: req.synchronous,
    });
    return create(CreateDatabaseResponseSchema, answer);
  };
}
