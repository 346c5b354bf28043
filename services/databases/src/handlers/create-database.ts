import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ID_MAX_LENGTH, REGIONS, TIERS, Validator, codePointLength, newId, withTransaction } from "@dbaas/kit";
import { CreateDatabaseResponseSchema, type CreateDatabaseRequest, type CreateDatabaseResponse } from "@dbaas/proto/databases";
import { requireAllowance } from "../allowance.ts";
import type { AppContext } from "../context.ts";
import { availableVersions } from "../db/agents.ts";
import { insertDatabase, nameTaken, setStatus } from "../db/databases.ts";
import { notifyAgent } from "../db/notify.ts";
import { startOperation } from "../db/operations.ts";
import { TRANSITIONS } from "../lifecycle.ts";
import { connectionString, toDatabase } from "../mappers.ts";
import { placeDatabase } from "../placement.ts";
import { generatePassword, scramVerifier } from "../scram.ts";
import { validateName } from "../validation.ts";

/**
 * A new database, placed on an agent, provisioning until that agent reports it
 * running; the answer carries its password, which is never shown again.
 */
export function createDatabase(ctx: AppContext) {
  return async (req: CreateDatabaseRequest): Promise<CreateDatabaseResponse> => {
    const v = new Validator();
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
    const version = req.version === "" ? ctx.cfg.defaultVersion : req.version;
    v.oneOf("version", version, await availableVersions(ctx.pool));
    if (req.organizationId === "") v.add("organization_id", "is required");
    // Stored and indexed with the name: an internal caller's junk must not reach the index as a 500.
    else if (codePointLength(req.organizationId) > ID_MAX_LENGTH) v.add("organization_id", `must be at most ${ID_MAX_LENGTH} characters`);
    v.throwIfAny();

    const id = newId("db");
    const password = generatePassword();
    const verifier = scramVerifier(password);
    const { to: status, desired } = TRANSITIONS.create;
    try {
      const row = await withTransaction(ctx.pool, async (db) => {
        await requireAllowance(db, ctx.billing, ctx.log, req.organizationId, { tier: req.tier });
        const placement = await placeDatabase(db, {
          region: req.region,
          version,
          timeoutSeconds: ctx.cfg.agentTimeoutSeconds,
          now: ctx.clock.now(),
        });
        const created = await insertDatabase(db, {
          id,
          organizationId: req.organizationId,
          name,
          region: req.region,
          tier: req.tier,
          version,
          status,
          desired,
          agentId: placement.agentId,
          port: placement.port,
          scramVerifier: verifier,
        });
        await setStatus(db, created, status);
        await startOperation(db, id, "create", created.generation);
        await notifyAgent(db, created.agent_id);
        return created;
      });
      ctx.log.info("database created", { database_id: id, agent_id: row.agent_id, port: row.port });
      return create(CreateDatabaseResponseSchema, {
        database: toDatabase(row, ctx.cfg.databaseDomain),
        password,
        connectionString: connectionString(row, ctx.cfg.databaseDomain, password),
      });
    } catch (err) {
      if (nameTaken(err)) throw new ConnectError(`a database named "${name}" already exists`, Code.AlreadyExists);
      throw err;
    }
  };
}
