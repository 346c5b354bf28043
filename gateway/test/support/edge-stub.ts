import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { conflict, invalidArgument, notFound } from "@dbaas/kit";
import {
  PoolerSchema,
  TrustedSourceSchema,
  type Database,
  type DatabasesService,
  type Pooler,
  type TrustedSource,
} from "@dbaas/proto/databases";
import { record, T0, type StubState } from "./stub-state.ts";

type Find = (org: string, id: string) => Promise<{ db: Database }>;

/** Trusted sources per database (docs/product.md, Trusted sources and connection pooling). */
export const MAX_TRUSTED_SOURCES = 50;

/**
 * The trusted-source and pooler RPCs as databases_service.proto states them: a CIDR that is not
 * one in network form is INVALID_ARGUMENT naming `cidr` (the service's parser decides; the stub
 * takes only `a.b.c.d/n` with the host bits clear), a 51st entry FAILED_PRECONDITION, a repeat
 * ALREADY_EXISTS; UpdatePooler refuses a mode or pool size out of bounds naming the field.
 */
export function edgeRoutes(
  state: StubState,
  find: Find,
): Pick<
  ServiceImpl<typeof DatabasesService>,
  "listTrustedSources" | "createTrustedSource" | "deleteTrustedSource" | "getPooler" | "updatePooler"
> {
  const lists = new Map<string, TrustedSource[]>();
  const poolers = new Map<string, Pooler>();
  const listOf = (id: string) => lists.get(id) ?? [];
  const poolerOf = (db: Database) =>
    poolers.get(db.id) ??
    create(PoolerSchema, {
      enabled: true,
      mode: "transaction",
      poolSize: 20,
      maxClientConnections: 1000,
      host: `${db.id}-pooler.db.example.com`,
      port: db.port + 1000,
      connectionString: `postgresql://dbadmin:********@${db.id}-pooler.db.example.com:${db.port + 1000}/defaultdb?sslmode=require`,
    });
  let serial = 0;
  return {
    async listTrustedSources(req) {
      record(state, "listTrustedSources", req);
      const { db } = await find(req.organizationId, req.databaseId);
      const all = listOf(db.id);
      const perPage = req.perPage || 20;
      const page = req.page || 1;
      return { trustedSources: all.slice((page - 1) * perPage, page * perPage), total: all.length, page, perPage };
    },
    async createTrustedSource(req) {
      record(state, "createTrustedSource", req);
      const { db } = await find(req.organizationId, req.databaseId);
      const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(req.cidr);
      if (m?.[4] !== "0") throw invalidArgument([{ field: "cidr", message: `"${req.cidr}" is not a network in CIDR form` }]);
      if (req.expiresAt && timestampDate(req.expiresAt).getTime() <= Date.now()) {
        throw invalidArgument([{ field: "expires_at", message: "must be in the future" }]);
      }
      const all = listOf(db.id);
      if (all.length >= MAX_TRUSTED_SOURCES) throw conflict(`the database already has ${MAX_TRUSTED_SOURCES} trusted sources`);
      if (all.some((t) => t.cidr === req.cidr)) throw new ConnectError(`${req.cidr} is already a trusted source`, Code.AlreadyExists);
      const t = create(TrustedSourceSchema, {
        id: `ts-stub${++serial}`,
        cidr: req.cidr,
        description: req.description,
        expiresAt: req.expiresAt,
        createdAt: timestampFromDate(T0),
      });
      lists.set(db.id, [...all, t]);
      return { trustedSource: t };
    },
    async deleteTrustedSource(req) {
      record(state, "deleteTrustedSource", req);
      const { db } = await find(req.organizationId, req.databaseId);
      const all = listOf(db.id);
      if (!all.some((t) => t.id === req.trustedSourceId)) throw notFound("trusted source");
      lists.set(
        db.id,
        all.filter((t) => t.id !== req.trustedSourceId),
      );
      return {};
    },
    async getPooler(req) {
      record(state, "getPooler", req);
      const { db } = await find(req.organizationId, req.databaseId);
      return { pooler: poolerOf(db) };
    },
    async updatePooler(req) {
      record(state, "updatePooler", req);
      const { db } = await find(req.organizationId, req.databaseId);
      if (req.mode !== undefined && !["transaction", "session"].includes(req.mode)) {
        throw invalidArgument([{ field: "mode", message: "must be one of: transaction, session" }]);
      }
      if (req.poolSize !== undefined && (req.poolSize < 1 || req.poolSize > 45)) {
        throw invalidArgument([{ field: "pool_size", message: "must be between 1 and 45 (the micro tier's max_connections less 5)" }]);
      }
      const cur = poolerOf(db);
      const next = create(PoolerSchema, {
        ...cur,
        enabled: req.enabled ?? cur.enabled,
        mode: req.mode ?? cur.mode,
        poolSize: req.poolSize ?? cur.poolSize,
      });
      poolers.set(db.id, next);
      return { pooler: next };
    },
  };
}
