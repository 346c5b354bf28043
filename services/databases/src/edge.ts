import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  isTierName,
  MAX_TRUSTED_SOURCES,
  maxPoolSize,
  POOLER_MAX_CLIENT_CONNECTIONS,
  POOLER_MODES,
  TIER_POOL_SIZE,
  type PoolerMode,
} from "@dbaas/catalogue";
import { Code, ConnectError } from "@connectrpc/connect";
import { checkPaging, conflict, newId, notFound, Validator, withTransaction } from "@dbaas/kit";
import { PoolerSpecSchema, TrustedSourceSpecSchema, type PoolerSpec, type TrustedSourceSpec } from "@dbaas/proto/agent";
import {
  CreateTrustedSourceResponseSchema,
  DeleteTrustedSourceResponseSchema,
  GetPoolerResponseSchema,
  ListTrustedSourcesResponseSchema,
  PoolerSchema,
  TrustedSourceSchema,
  UpdatePoolerResponseSchema,
  type CreateTrustedSourceRequest,
  type DeleteTrustedSourceRequest,
  type GetPoolerRequest,
  type ListTrustedSourcesRequest,
  type Pooler,
  type TrustedSource,
  type UpdatePoolerRequest,
} from "@dbaas/proto/databases";
import type pg from "pg";
import { parseCidr } from "./cidr.ts";
import type { AppContext } from "./context.ts";
import { findOwned, type DatabaseRow } from "./db/databases.ts";
import {
  agentPooling,
  cidrTaken,
  DEFAULT_POOLER,
  deleteTrustedSource as deleteRow,
  insertTrustedSource,
  listTrustedSources as listRows,
  lockTrustedSources,
  poolersOf,
  upsertPooler,
  type AgentPooling,
  type PoolerRow,
  type TrustedSourceRow,
} from "./db/edge.ts";
import { notifyAgent } from "./db/notify.ts";
import { DATABASE_NAME, MASK, poolerHost, USERNAME } from "./mappers.ts";

/*
 * A database's edge (docs/product.md, Trusted sources and connection pooling): which addresses may
 * connect, and its PgBouncer. Both reach the agents through the specs (watch-assignments.ts): a
 * change notifies the agent of the database and those of its replicas, whose watch streams send
 * the new state at once, so the agents apply it well within 5 s.
 */

export const DESCRIPTION_MAX_LENGTH = 255;

export function toTrustedSource(r: TrustedSourceRow): TrustedSource {
  return create(TrustedSourceSchema, {
    id: r.id,
    cidr: r.cidr,
    description: r.description,
    expiresAt: r.expires_at ? timestampFromDate(r.expires_at) : undefined,
    createdAt: timestampFromDate(r.created_at),
  });
}

/** The database's and its live replicas' agents, notified inside the caller's transaction (delivered at commit). */
async function notifyEdgeAgents(db: pg.ClientBase, databaseId: string): Promise<void> {
  const { rows } = await db.query<{ agent_id: string }>(
    "SELECT DISTINCT agent_id FROM databases WHERE (id = $1 OR primary_id = $1) AND deleted_at IS NULL",
    [databaseId],
  );
  for (const r of rows) await notifyAgent(db, r.agent_id);
}

async function owned(ctx: AppContext, organizationId: string, databaseId: string): Promise<DatabaseRow> {
  const row = await findOwned(ctx.pool, organizationId, databaseId);
  if (!row) throw notFound("database");
  return row;
}

export function listTrustedSources(ctx: AppContext) {
  return async (req: ListTrustedSourcesRequest) => {
    const v = new Validator();
    const { page, perPage } = checkPaging(v, req.page, req.perPage);
    v.throwIfAny();
    const db = await owned(ctx, req.organizationId, req.databaseId);
    const { rows, total } = await listRows(ctx.pool, db.id, ctx.clock.now(), perPage, (page - 1) * perPage);
    return create(ListTrustedSourcesResponseSchema, { trustedSources: rows.map(toTrustedSource), total, page, perPage });
  };
}

export function createTrustedSource(ctx: AppContext) {
  return async (req: CreateTrustedSourceRequest) => {
    const now = ctx.clock.now();
    const v = new Validator();
    const parsed = parseCidr(req.cidr);
    if (!parsed.ok) v.add("cidr", parsed.message);
    const description = req.description.trim();
    if ([...description].length > DESCRIPTION_MAX_LENGTH) v.add("description", `must be at most ${DESCRIPTION_MAX_LENGTH} characters`);
    const expiresAt = req.expiresAt ? timestampDate(req.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= now.getTime()) v.add("expires_at", "must be in the future");
    v.throwIfAny();
    const db = await owned(ctx, req.organizationId, req.databaseId);
    const row = await withTransaction(ctx.pool, async (tx) => {
      const count = await lockTrustedSources(tx, db.id, now);
      if (count >= MAX_TRUSTED_SOURCES) {
        throw conflict(`the database already has ${MAX_TRUSTED_SOURCES} trusted sources, the most it can have: remove one first`);
      }
      try {
        const inserted = await insertTrustedSource(tx, {
          id: newId("ts"),
          databaseId: db.id,
          cidr: parsed.ok ? parsed.cidr : "",
          description,
          expiresAt,
          now,
        });
        await notifyEdgeAgents(tx, db.id);
        return inserted;
      } catch (e) {
        if (cidrTaken(e))
          throw new ConnectError(`${parsed.ok ? parsed.cidr : req.cidr} is already a trusted source of this database`, Code.AlreadyExists);
        throw e;
      }
    });
    return create(CreateTrustedSourceResponseSchema, { trustedSource: toTrustedSource(row) });
  };
}

export function deleteTrustedSource(ctx: AppContext) {
  return async (req: DeleteTrustedSourceRequest) => {
    const db = await owned(ctx, req.organizationId, req.databaseId);
    await withTransaction(ctx.pool, async (tx) => {
      await lockTrustedSources(tx, db.id, ctx.clock.now());
      if (!(await deleteRow(tx, db.id, req.trustedSourceId, ctx.clock.now()))) throw notFound("trusted source");
      await notifyEdgeAgents(tx, db.id);
    });
    return create(DeleteTrustedSourceResponseSchema, {});
  };
}

/** The pool size a database's pooler runs with: the customer's within what the tier allows now, else the tier's default. */
export function effectivePoolSize(row: PoolerRow, tier: string): number {
  if (!isTierName(tier)) return 1;
  return Math.min(row.pool_size ?? TIER_POOL_SIZE[tier], maxPoolSize(tier));
}

/** The pooler as the API shows it: disabled with the reason where the database's host cannot run one. */
export function toPooler(db: DatabaseRow, row: PoolerRow, agent: AgentPooling, domain: string): Pooler {
  const available = agent.pooler_port_offset > 0;
  const host = poolerHost(db.id, domain);
  const port = available ? db.port + agent.pooler_port_offset : 0;
  return create(PoolerSchema, {
    enabled: available && row.enabled,
    mode: row.mode,
    poolSize: effectivePoolSize(row, db.tier),
    maxClientConnections: POOLER_MAX_CLIENT_CONNECTIONS,
    host: available ? host : "",
    port,
    connectionString: available ? `postgresql://${USERNAME}:${MASK}@${host}:${port}/${DATABASE_NAME}?sslmode=require` : "",
    reason: available ? "" : `no connection pooler on this database's host: ${agent.pooler_unavailable_reason}`,
  });
}

/** The pooler part of an instance spec (primaries only): what the agent runs. */
export function poolerSpec(db: DatabaseRow, row: PoolerRow, offset: number, domain: string): PoolerSpec | undefined {
  if (offset <= 0 || db.primary_id !== null) return undefined;
  return create(PoolerSpecSchema, {
    enabled: row.enabled,
    mode: row.mode,
    poolSize: effectivePoolSize(row, db.tier),
    maxClientConnections: POOLER_MAX_CLIENT_CONNECTIONS,
    port: db.port + offset,
    host: poolerHost(db.id, domain),
  });
}

export function trustedSourceSpecs(rows: readonly TrustedSourceRow[]): TrustedSourceSpec[] {
  return rows.map((r) =>
    create(TrustedSourceSpecSchema, { cidr: r.cidr, expiresAt: r.expires_at ? timestampFromDate(r.expires_at) : undefined }),
  );
}

export function getPooler(ctx: AppContext) {
  return async (req: GetPoolerRequest) => {
    const db = await owned(ctx, req.organizationId, req.databaseId);
    const row = (await poolersOf(ctx.pool, [db.id])).get(db.id) ?? DEFAULT_POOLER;
    const agent = await agentPooling(ctx.pool, db.agent_id);
    return create(GetPoolerResponseSchema, { pooler: toPooler(db, row, agent, ctx.cfg.databaseDomain) });
  };
}

export function updatePooler(ctx: AppContext) {
  return async (req: UpdatePoolerRequest) => {
    const db = await owned(ctx, req.organizationId, req.databaseId);
    const v = new Validator();
    if (req.mode !== undefined) v.oneOf("mode", req.mode, POOLER_MODES);
    if (req.poolSize !== undefined && isTierName(db.tier)) {
      const max = maxPoolSize(db.tier);
      if (req.poolSize < 1 || req.poolSize > max) {
        v.add("pool_size", `must be between 1 and ${max} (the ${db.tier} tier's max_connections less 5)`);
      }
    }
    v.throwIfAny();
    const agent = await agentPooling(ctx.pool, db.agent_id);
    if (req.enabled === true && agent.pooler_port_offset <= 0) {
      throw conflict(`no connection pooler can run on this database's host: ${agent.pooler_unavailable_reason}`);
    }
    const row = await withTransaction(ctx.pool, async (tx) => {
      await tx.query("SELECT 1 FROM databases WHERE id = $1 FOR UPDATE", [db.id]);
      const cur = (await poolersOf(tx, [db.id])).get(db.id) ?? DEFAULT_POOLER;
      const next: PoolerRow = {
        enabled: req.enabled ?? cur.enabled,
        mode: (req.mode as PoolerMode | undefined) ?? cur.mode,
        pool_size: req.poolSize ?? cur.pool_size,
      };
      await upsertPooler(tx, db.id, next);
      await notifyAgent(tx, db.agent_id);
      return next;
    });
    return create(UpdatePoolerResponseSchema, { pooler: toPooler(db, row, agent, ctx.cfg.databaseDomain) });
  };
}
