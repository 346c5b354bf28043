import { Code, ConnectError } from "@connectrpc/connect";
import { ID_MAX_LENGTH, codePointLength, newId, withTransaction, type Validator } from "@dbaas/kit";
import { REGIONS, TIERS, requireGoodStanding } from "@dbaas/catalogue";
import type { Database } from "@dbaas/proto/databases";
import { requireAllowance } from "./allowance.ts";
import type { AppContext } from "./context.ts";
import { insertDatabase, nameTaken, setStatus } from "./db/databases.ts";
import { copyConfig } from "./db/config.ts";
import { copyRoles } from "./db/inside.ts";
import { notifyAgent } from "./db/notify.ts";
import { startOperation } from "./db/operations.ts";
import { TRANSITIONS } from "./lifecycle.ts";
import { connectionString, toDatabase } from "./mappers.ts";
import { type HaPlacement, insertStandby, placeWithStandbys } from "./high-availability.ts";
import { placeDatabase } from "./placement.ts";
import { newCredentials } from "./scram.ts";
import { validateName } from "./validation.ts";

/** What a new database is made of: a create's fields, or a restore's (the source's version, its backups up to an instant). */
export interface NewDatabase {
  organizationId: string;
  /** Validated (validateNewDatabase). */
  name: string;
  region: string;
  tier: string;
  version: string;
  /** The operation it is recorded under. */
  operation: "create" | "restore";
  /** Standbys placed with it (high availability; 0 by default) and whether it commits synchronously. */
  standbys?: number;
  synchronous?: boolean;
  restoredFrom?: { databaseId: string; restoreTime: Date };
}

/** The answer to a create or a restore: the database, and its password, which is never shown again. */
export interface NewDatabaseAnswer {
  database: Database;
  password: string;
  connectionString: string;
}

/** The rules every new database's request meets (name, region, tier, organization); answers the name as stored. */
export function validateNewDatabase(v: Validator, req: { organizationId: string; name: string; region: string; tier: string }): string {
  const name = validateName(v, req.name);
  v.oneOf(
    "region",
    req.region,
    REGIONS.map((r) => r.code),
  );
  v.oneOf(
    "tier",
    req.tier,
    TIERS.map((t) => t.name),
  );
  if (req.organizationId === "") v.add("organization_id", "is required");
  // Stored and indexed with the name: an internal caller's junk must not reach the index as a 500.
  else if (codePointLength(req.organizationId) > ID_MAX_LENGTH) v.add("organization_id", `must be at most ${ID_MAX_LENGTH} characters`);
  return name;
}

/**
 * A new database, within the organization's allowance, placed on an agent,
 * provisioning until that agent reports it running — created empty, or from
 * another database's backups (`restoredFrom`). A name a live database of the
 * organization has, case aside, is ALREADY_EXISTS.
 */
export async function provisionDatabase(ctx: AppContext, n: NewDatabase): Promise<NewDatabaseAnswer> {
  const id = newId("db");
  const { password, verifier } = newCredentials(ctx.cfg.scramIterations);
  const { to: status, desired } = TRANSITIONS.create;
  try {
    const standbys = n.standbys ?? 0;
    const row = await withTransaction(ctx.pool, async (db) => {
      await requireAllowance(db, ctx.billing, ctx.log, n.organizationId, { tier: n.tier });
      // Standbys cost money whatever the free allowance.
      if (standbys > 0) await requireGoodStanding(ctx.billing, ctx.log, n.organizationId, "run standbys (billed as compute)");
      const candidates = { region: n.region, version: n.version, timeoutSeconds: ctx.cfg.agentTimeoutSeconds, now: ctx.clock.now() };
      const placement: HaPlacement =
        standbys > 0 ? await placeWithStandbys(db, candidates, standbys) : { ...(await placeDatabase(db, candidates)), standbyAgents: [] };
      const created = await insertDatabase(db, {
        id,
        organizationId: n.organizationId,
        name: n.name,
        region: n.region,
        tier: n.tier,
        version: n.version,
        status,
        desired,
        agentId: placement.agentId,
        port: placement.port,
        scramVerifier: verifier,
        restoredFrom: n.restoredFrom,
        ...(standbys > 0 && { ha: { standbys, synchronous: n.synchronous ?? false, nodeId: newId("node") } }),
      });
      await setStatus(db, created, status);
      // The restored data holds the source's roles: their records (when each was made) come along.
      if (n.restoredFrom) {
        await copyRoles(db, n.restoredFrom.databaseId, id);
        // And its configuration (docs/product.md, Inside the database).
        await copyConfig(db, n.restoredFrom.databaseId, id);
      }
      await startOperation(db, id, n.operation, created.generation);
      await notifyAgent(db, created.agent_id);
      // Seeded once the primary runs (the backup schedule's pass and the report that it runs ask).
      for (const agent of placement.standbyAgents) await insertStandby(db, created, agent);
      return created;
    });
    ctx.log.info(n.restoredFrom ? "database restored to a point in time" : "database created", {
      database_id: id,
      agent_id: row.agent_id,
      port: row.port,
      ...(n.restoredFrom && { restored_from: n.restoredFrom.databaseId, restore_time: n.restoredFrom.restoreTime.toISOString() }),
    });
    return {
      database: toDatabase(row, ctx.cfg.databaseDomain),
      password,
      connectionString: connectionString(row, ctx.cfg.databaseDomain, password),
    };
  } catch (err) {
    if (nameTaken(err)) throw new ConnectError(`a database named "${n.name}" already exists`, Code.AlreadyExists);
    throw err;
  }
}
