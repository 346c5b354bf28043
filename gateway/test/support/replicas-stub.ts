import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { conflict, invalidArgument, notFound, withReason } from "@dbaas/kit";
import { ReplicaSchema, type Database, type DatabasesService, type Replica } from "@dbaas/proto/databases";
import { record, T0, type StubState } from "./stub-state.ts";

type Find = (org: string, id: string) => Promise<{ db: Database }>;
/** CreateDatabase's record (stubs.ts), which a promoted replica becomes as the service's does. */
type NewDatabase = (
  state: StubState,
  req: { organizationId: string; name: string; region: string; tier: string; version: string },
) => { database: Database };

/** Live replicas per database (docs/product.md, Read replicas). */
export const MAX_REPLICAS = 5;

/** Gives a replica the status the agents would have brought it to (a test's shortcut past provisioning). */
export function setReplicaStatus(state: StubState, replicaId: string, status: string, reason = ""): void {
  const r = state.replicas.get(replicaId);
  if (!r) throw new Error(`no replica ${replicaId} in the stub`);
  r.status = status;
  r.statusReason = reason;
}

/**
 * The replica RPCs as databases_service.proto states them: CreateReplica
 * refuses a primary that is not running or has 5 replicas
 * (FAILED_PRECONDITION), then an organization without a default payment
 * method (payment_required), a name taken among the primary's replicas
 * (ALREADY_EXISTS); a replica of another database or organization is
 * NOT_FOUND; PromoteReplica takes a running replica only and answers the new
 * database, the replica gone.
 */
export function replicaRoutes(
  state: StubState,
  find: Find,
  newDatabase: NewDatabase,
): Pick<ServiceImpl<typeof DatabasesService>, "createReplica" | "listReplicas" | "getReplica" | "deleteReplica" | "promoteReplica"> {
  const replicasOf = (databaseId: string) => [...state.replicas.values()].filter((r) => r.databaseId === databaseId);
  const findReplica = async (org: string, databaseId: string, replicaId: string) => {
    await find(org, databaseId);
    const r = state.replicas.get(replicaId);
    if (!r || r.databaseId !== databaseId) throw notFound("replica");
    return r;
  };
  let serial = 0;
  return {
    async createReplica(req) {
      record(state, "createReplica", req);
      const { db } = await find(req.organizationId, req.databaseId);
      // The gateway admits only catalogue names; this one stands for a rule only the service knows.
      if (req.name === "stub-refuses") throw invalidArgument([{ field: "name", message: "must be 3-63 characters" }]);
      // In the service's order: the primary's status and the limit, then the organization's standing.
      if (db.status !== "running") throw conflict(`the database is ${db.status}: replicas are made of a running database`);
      const siblings = replicasOf(db.id);
      if (siblings.length >= MAX_REPLICAS) throw conflict(`the database already has ${MAX_REPLICAS} replicas, the most it can have`);
      const paying = state.paymentMethods.some((pm) => pm.organizationId === req.organizationId && pm.isDefault);
      if (!paying) throw withReason("a replica is billed: add a payment method first", Code.FailedPrecondition, "payment_required");
      if (siblings.some((r) => r.name === req.name)) {
        throw new ConnectError(`the database already has a replica named "${req.name}"`, Code.AlreadyExists);
      }
      const id = `rep-${db.id.slice(3)}r${++serial}`;
      const host = `${id}.db.example.test`;
      const replica = create(ReplicaSchema, {
        id,
        name: req.name,
        databaseId: db.id,
        region: req.region || db.region,
        tier: req.tier || db.tier,
        status: "provisioning",
        host,
        port: 6432,
        database: db.database,
        username: db.username,
        connectionString: `postgresql://${db.username}:********@${host}:6432/${db.database}?sslmode=require`,
        createdAt: timestampFromDate(T0),
      });
      state.replicas.set(id, replica);
      return { replica };
    },
    async listReplicas(req) {
      record(state, "listReplicas", req);
      await find(req.organizationId, req.databaseId);
      const all = replicasOf(req.databaseId);
      const start = (req.page - 1) * req.perPage;
      return { replicas: all.slice(start, start + req.perPage), total: all.length, page: req.page, perPage: req.perPage };
    },
    async getReplica(req) {
      return { replica: await findReplica(req.organizationId, req.databaseId, req.replicaId) };
    },
    async deleteReplica(req) {
      record(state, "deleteReplica", req);
      const r = await findReplica(req.organizationId, req.databaseId, req.replicaId);
      state.replicas.delete(r.id);
      return {};
    },
    async promoteReplica(req) {
      record(state, "promoteReplica", req);
      const r: Replica = await findReplica(req.organizationId, req.databaseId, req.replicaId);
      if (r.status !== "running") throw conflict(`the replica is ${r.status}: only a running replica can be promoted`);
      const taken = [...state.databases.values()].some((e) => e.db.organizationId === req.organizationId && e.db.name === r.name);
      if (taken) throw new ConnectError(`a database named "${r.name}" already exists`, Code.AlreadyExists);
      const { db: primary } = await find(req.organizationId, req.databaseId);
      const { database } = newDatabase(state, {
        organizationId: req.organizationId,
        name: r.name,
        region: r.region,
        tier: r.tier,
        version: primary.version,
      });
      database.status = "starting";
      // As the service does: the new database's first operation is its promotion.
      state.operations.set(database.id, [
        {
          id: `op-${database.id.slice(3)}p`,
          databaseId: database.id,
          type: "promote",
          status: "running",
          startedAt: timestampFromDate(T0),
        },
      ]);
      state.replicas.delete(r.id);
      return { database };
    },
  };
}
