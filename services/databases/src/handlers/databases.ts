import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type pg from "pg";
import {
  ID_MAX_LENGTH,
  REGIONS,
  TIERS,
  Validator,
  callerKey,
  codePointLength,
  conflict,
  invalidArgument,
  newId,
  notFound,
  permissionDenied,
  withTransaction,
} from "@dbaas/kit";
import {
  BatchGetDatabasesResponseSchema,
  CreateDatabaseResponseSchema,
  DatabasesService,
  DeleteDatabaseResponseSchema,
  GetCaCertificateResponseSchema,
  GetDatabaseResponseSchema,
  ListDatabasesResponseSchema,
  ListOperationsResponseSchema,
  ListRegionsResponseSchema,
  ListTiersResponseSchema,
  ListVersionsResponseSchema,
  RegionSchema,
  TierSchema,
  VersionSchema,
} from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { requireAllowance } from "../allowance.ts";
import { placeDatabase } from "../placement.ts";
import {
  connectionString,
  lockOwned,
  notifyAgent,
  setStatus,
  startOperation,
  toDatabase,
  toOperation,
  type DatabaseRow,
  type OperationRow,
} from "../records.ts";
import { generatePassword, scramVerifier } from "../scram.ts";
import { validateName, validatePaging } from "../validation.ts";
import { BATCH_GET_MAX_REQUESTS, itemError, liveDatabaseReader, type DatabaseKey } from "../live-databases.ts";
import { resetPassword } from "./reset-password.ts";

export const STATUSES = ["provisioning", "running", "starting", "stopping", "stopped", "restarting", "resizing", "failed"];

/** Versions whose server binaries at least one registered agent has. */
async function availableVersions(db: pg.Pool | pg.ClientBase): Promise<string[]> {
  const { rows } = await db.query<{ v: string }>("SELECT v FROM (SELECT DISTINCT unnest(versions) AS v FROM agents) s ORDER BY string_to_array(v, '.')::int[] DESC");
  return rows.map((r) => r.v);
}


function uniqueViolation(err: unknown, constraint: string): boolean {
  return (err as { code?: string; constraint?: string }).code === "23505" && (err as { constraint?: string }).constraint === constraint;
}

interface Transition {
  type: string;
  /** Statuses the operation may start from; others are a conflict naming the current one. */
  from: string[];
  /** The transitional status shown until the agent reports the outcome. */
  status: string;
  desired?: "running" | "stopped";
  tier?: string;
}

export function databasesHandlers(ctx: AppContext): Partial<ServiceImpl<typeof DatabasesService>> {
  const domain = ctx.cfg.databaseDomain;
  const liveDatabase = liveDatabaseReader(ctx.pool);

  /** The database GetDatabase answers: a live one of the request's own organization, else NOT_FOUND. */
  const ownedDatabase = async (req: DatabaseKey) => {
    const row = await liveDatabase(req);
    if (!row) throw notFound("database");
    return toDatabase(row, domain);
  };

  /** Moves a database into a transitional status and bumps its spec for the agent. */
  const transition = (orgId: string, id: string, t: Transition) =>
    withTransaction(ctx.pool, async (db) => {
      const row = await lockOwned(db, orgId, id);
      if (!t.from.includes(row.status)) {
        throw conflict(`cannot ${t.type} a database that is ${row.status}`);
      }
      // Starting it, or running it at another tier, must fit the organization's allowance.
      const starts = t.desired === "running" && row.desired_state !== "running";
      const resizesRunning = t.tier !== undefined && row.desired_state === "running";
      if (starts || resizesRunning) {
        await requireAllowance(db, ctx.billing, ctx.log, orgId, { tier: t.tier ?? row.tier, replaces: row.id });
      }
      const { rows } = await db.query<DatabaseRow>(
        `UPDATE databases SET desired_state = COALESCE($2, desired_state), tier = COALESCE($3, tier),
           generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING *`,
        [id, t.desired ?? null, t.tier ?? null],
      );
      const updated = rows[0]!;
      await setStatus(db, updated, t.status);
      await startOperation(db, id, t.type, updated.generation);
      await notifyAgent(db, updated.agent_id);
      return { ...updated, status: t.status, status_reason: "" };
    });

  return {
    resetPassword: resetPassword(ctx),

    async createDatabase(req) {
      const v = new Validator();
      const name = validateName(v, req.name);
      v.oneOf("region", req.region, REGIONS.map((r) => r.code));
      v.oneOf("tier", req.tier, TIERS.map((t) => t.name));
      const version = req.version === "" ? ctx.cfg.defaultVersion : req.version;
      v.oneOf("version", version, await availableVersions(ctx.pool));
      if (req.organizationId === "") v.add("organization_id", "is required");
      // Stored and indexed with the name: an internal caller's junk must not reach the index as a 500.
      else if (codePointLength(req.organizationId) > ID_MAX_LENGTH) v.add("organization_id", `must be at most ${ID_MAX_LENGTH} characters`);
      v.throwIfAny();

      const id = newId("db");
      const password = generatePassword();
      const verifier = scramVerifier(password);
      try {
        const row = await withTransaction(ctx.pool, async (db) => {
          await requireAllowance(db, ctx.billing, ctx.log, req.organizationId, { tier: req.tier });
          const placement = await placeDatabase(db, req.region, version, ctx.cfg.agentTimeoutSeconds);
          const { rows } = await db.query<DatabaseRow>(
            `INSERT INTO databases (id, organization_id, name, region, tier, version, status, agent_id, port,
               desired_state, scram_verifier)
             VALUES ($1, $2, $3, $4, $5, $6, 'provisioning', $7, $8, 'running', $9) RETURNING *`,
            [id, req.organizationId, name, req.region, req.tier, version, placement.agentId, placement.port, verifier],
          );
          const created = rows[0]!;
          await setStatus(db, created, "provisioning");
          await startOperation(db, id, "create", created.generation);
          await notifyAgent(db, created.agent_id);
          return created;
        });
        ctx.log.info("database created", { database_id: id, agent_id: row.agent_id, port: row.port });
        return create(CreateDatabaseResponseSchema, {
          database: toDatabase(row, domain),
          password,
          connectionString: connectionString(row, domain, password),
        });
      } catch (err) {
        if (uniqueViolation(err, "databases_live_name")) {
          throw new ConnectError(`a database named "${name}" already exists`, Code.AlreadyExists);
        }
        throw err;
      }
    },

    async getDatabase(req) {
      return create(GetDatabaseResponseSchema, { database: await ownedDatabase(req) });
    },

    async batchGetDatabases(req) {
      if (req.requests.length > BATCH_GET_MAX_REQUESTS) {
        throw invalidArgument([{ field: "requests", message: `must hold at most ${BATCH_GET_MAX_REQUESTS} requests` }]);
      }
      // Through GetDatabase's read batcher: the items share one query, with the other lookups of this iteration.
      const results = await Promise.all(
        req.requests.map((item) =>
          ownedDatabase(item).then(
            (database) => ({ result: { case: "database" as const, value: database } }),
            (err: unknown) => ({ result: { case: "error" as const, value: itemError(err) } }),
          ),
        ),
      );
      return create(BatchGetDatabasesResponseSchema, { results });
    },

    async listDatabases(req) {
      const v = new Validator();
      const { page, perPage } = validatePaging(v, req.page, req.perPage);
      if (req.status !== "") v.oneOf("status", req.status, STATUSES);
      if (req.region !== "") v.oneOf("region", req.region, REGIONS.map((r) => r.code));
      v.throwIfAny();
      const where = "organization_id = $1 AND deleted_at IS NULL AND ($2 = '' OR status = $2) AND ($3 = '' OR region = $3)";
      const params = [req.organizationId, req.status, req.region];
      const [{ rows }, count] = await Promise.all([
        ctx.pool.query<DatabaseRow>(
          `SELECT * FROM databases WHERE ${where} ORDER BY created_at DESC, id LIMIT $4 OFFSET $5`,
          [...params, perPage, (page - 1) * perPage],
        ),
        ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM databases WHERE ${where}`, params),
      ]);
      return create(ListDatabasesResponseSchema, {
        databases: rows.map((r) => toDatabase(r, domain)),
        total: count.rows[0]!.n,
        page,
        perPage,
      });
    },

    async updateDatabase(req) {
      const v = new Validator();
      const name = req.name === undefined ? undefined : validateName(v, req.name);
      v.throwIfAny();
      try {
        const row = await withTransaction(ctx.pool, async (db) => {
          const current = await lockOwned(db, req.organizationId, req.id);
          if (name === undefined || name === current.name) return current;
          const { rows } = await db.query<DatabaseRow>(
            "UPDATE databases SET name = $2, updated_at = now() WHERE id = $1 RETURNING *",
            [req.id, name],
          );
          return rows[0]!;
        });
        return { database: toDatabase(row, domain) };
      } catch (err) {
        if (uniqueViolation(err, "databases_live_name")) {
          throw new ConnectError(`a database named "${name}" already exists`, Code.AlreadyExists);
        }
        throw err;
      }
    },

    async deleteDatabase(req) {
      await withTransaction(ctx.pool, async (db) => {
        const row = await lockOwned(db, req.organizationId, req.id);
        const { rows } = await db.query<DatabaseRow>(
          `UPDATE databases SET desired_state = 'deleted', deleted_at = now(),
             purge_after = now() + make_interval(secs => $2), generation = generation + 1, updated_at = now()
           WHERE id = $1 RETURNING *`,
          [row.id, ctx.cfg.retentionSeconds],
        );
        await setStatus(db, rows[0]!, "deleted");
        await startOperation(db, row.id, "delete", rows[0]!.generation);
        await notifyAgent(db, row.agent_id);
      });
      return create(DeleteDatabaseResponseSchema, {});
    },

    async startDatabase(req) {
      const row = await transition(req.organizationId, req.id, {
        type: "start", from: ["stopped", "failed"], status: "starting", desired: "running",
      });
      return { database: toDatabase(row, domain) };
    },

    async stopDatabase(req) {
      const row = await transition(req.organizationId, req.id, {
        type: "stop", from: ["running", "failed"], status: "stopping", desired: "stopped",
      });
      return { database: toDatabase(row, domain) };
    },

    async restartDatabase(req) {
      const row = await transition(req.organizationId, req.id, {
        type: "restart", from: ["running", "failed"], status: "restarting", desired: "running",
      });
      return { database: toDatabase(row, domain) };
    },

    async resizeDatabase(req) {
      const v = new Validator();
      v.oneOf("tier", req.tier, TIERS.map((t) => t.name));
      v.throwIfAny();
      const { rows } = await ctx.pool.query<DatabaseRow>(
        "SELECT * FROM databases WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL",
        [req.id, req.organizationId],
      );
      if (!rows[0]) throw notFound("database");
      if (rows[0].tier === req.tier) new Validator().add("tier", `is already ${req.tier}`).throwIfAny();
      const row = await transition(req.organizationId, req.id, {
        type: "resize", from: ["running", "stopped"], status: "resizing", tier: req.tier,
      });
      return { database: toDatabase(row, domain) };
    },

    async listOperations(req) {
      const v = new Validator();
      const { page, perPage } = validatePaging(v, req.page, req.perPage);
      v.throwIfAny();
      const owned = await ctx.pool.query(
        "SELECT 1 FROM databases WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL",
        [req.databaseId, req.organizationId],
      );
      if (owned.rowCount === 0) throw notFound("database");
      const [{ rows }, count] = await Promise.all([
        ctx.pool.query<OperationRow>(
          "SELECT * FROM operations WHERE database_id = $1 ORDER BY started_at DESC, id LIMIT $2 OFFSET $3",
          [req.databaseId, perPage, (page - 1) * perPage],
        ),
        ctx.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM operations WHERE database_id = $1", [req.databaseId]),
      ]);
      return create(ListOperationsResponseSchema, {
        operations: rows.map(toOperation),
        total: count.rows[0]!.n,
        page,
        perPage,
      });
    },

    async getCaCertificate(req) {
      const { rows } = await ctx.pool.query<{ ca_certificate_pem: string }>(
        `SELECT a.ca_certificate_pem FROM databases d JOIN agents a ON a.id = d.agent_id
         WHERE d.id = $1 AND d.organization_id = $2 AND d.deleted_at IS NULL`,
        [req.id, req.organizationId],
      );
      if (!rows[0]) throw notFound("database");
      return create(GetCaCertificateResponseSchema, { pem: rows[0].ca_certificate_pem });
    },

    async restoreDatabase(req, handlerCtx) {
      if (handlerCtx.values.get(callerKey) !== "support") throw permissionDenied("restore is a support operation");
      try {
        const row = await withTransaction(ctx.pool, async (db) => {
          const { rows } = await db.query<DatabaseRow>(
            "SELECT * FROM databases WHERE id = $1 AND desired_state = 'deleted' FOR UPDATE",
            [req.id],
          );
          if (!rows[0]) throw notFound("deleted database within its retention window");
          const restored = await db.query<DatabaseRow>(
            `UPDATE databases SET desired_state = 'running', deleted_at = NULL, purge_after = NULL,
               generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING *`,
            [req.id],
          );
          const r = restored.rows[0]!;
          await setStatus(db, r, "starting");
          await startOperation(db, r.id, "restore", r.generation);
          await notifyAgent(db, r.agent_id);
          return { ...r, status: "starting" };
        });
        return { database: toDatabase(row, domain) };
      } catch (err) {
        if (uniqueViolation(err, "databases_live_name")) {
          throw conflict("a live database of the organization now has the same name; rename it first");
        }
        throw err;
      }
    },

    async listRegions() {
      return create(ListRegionsResponseSchema, { regions: REGIONS.map((r) => create(RegionSchema, r)) });
    },

    async listTiers() {
      return create(ListTiersResponseSchema, {
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
    },

    async listVersions() {
      const versions = await availableVersions(ctx.pool);
      return create(ListVersionsResponseSchema, {
        versions: versions.map((v) => create(VersionSchema, { version: v, isDefault: v === ctx.cfg.defaultVersion })),
      });
    },
  };
}
