import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import { conflict, invalidArgument, withReason } from "@dbaas/kit";
import {
  HighAvailabilityMemberSchema,
  HighAvailabilitySchema,
  OperationSchema,
  type Database,
  type DatabasesService,
  type HighAvailability,
} from "@dbaas/proto/databases";
import { record, T0, type StubState } from "./stub-state.ts";

type Find = (org: string, id: string) => Promise<{ db: Database }>;

/** The stub region's hosts: the primary's and two others, so at most 2 standbys fit. */
export const STUB_OTHER_HOSTS = 2;

/** A database's high availability as the stub keeps it. */
export interface StubHa {
  standbys: number;
  synchronous: boolean;
  lastFailover?: { at: Date; reason: string; from: string; to: string };
}

function record_(db: Database, ha: StubHa | undefined): HighAvailability {
  const h = ha ?? { standbys: 0, synchronous: false };
  return create(HighAvailabilitySchema, {
    standbys: h.standbys,
    synchronous: h.synchronous,
    members: [
      create(HighAvailabilityMemberSchema, {
        id: `node-${db.id.slice(3)}p`,
        role: "primary",
        status: db.status,
        region: db.region,
        lagBytes: 0n,
      }),
      ...Array.from({ length: h.standbys }, (_v, i) =>
        create(HighAvailabilityMemberSchema, {
          id: `node-${db.id.slice(3)}s${i + 1}`,
          role: "standby",
          status: "running",
          region: db.region,
          lagBytes: 128n,
        }),
      ),
    ],
    lastFailover: h.lastFailover
      ? {
          at: timestampFromDate(h.lastFailover.at),
          reason: h.lastFailover.reason,
          fromMember: h.lastFailover.from,
          toMember: h.lastFailover.to,
        }
      : undefined,
  });
}

/**
 * GetHighAvailability, SetHighAvailability and Failover as databases_service.proto states them: standbys 0-2
 * and synchronous with at least one (INVALID_ARGUMENT naming the field), adding standbys only to a running
 * database (FAILED_PRECONDITION) of an organization with a default payment method (payment_required), the
 * region's hosts (FAILED_PRECONDITION naming the reason); a switchover needs standbys and a running database.
 */
export function haRoutes(
  state: StubState,
  find: Find,
): Pick<ServiceImpl<typeof DatabasesService>, "getHighAvailability" | "setHighAvailability" | "failover"> {
  return {
    async getHighAvailability(req) {
      const { db } = await find(req.organizationId, req.databaseId);
      return { highAvailability: record_(db, state.ha.get(db.id)) };
    },
    async setHighAvailability(req) {
      record(state, "setHighAvailability", req);
      const { db } = await find(req.organizationId, req.databaseId);
      if (req.standbys < 0 || req.standbys > 2) throw invalidArgument([{ field: "standbys", message: "must be 0, 1 or 2" }]);
      if (req.synchronous && req.standbys < 1) throw invalidArgument([{ field: "synchronous", message: "needs at least 1 standby" }]);
      const current = state.ha.get(db.id);
      if (req.standbys > (current?.standbys ?? 0)) {
        if (db.status !== "running") throw conflict(`cannot add standbys to a database that is ${db.status}`);
        const paying = state.paymentMethods.some((pm) => pm.organizationId === req.organizationId && pm.isDefault);
        if (!paying) throw withReason("standbys are billed: add a payment method first", Code.FailedPrecondition, "payment_required");
        // The stub's "one-host" region stands for a region without hosts to spare.
        if (db.name.startsWith("one-host")) {
          throw conflict(
            `region ${db.region} has 0 hosts besides the primary's that can take a standby now (live, with PostgreSQL ${db.version}, ` +
              `capacity left and port ${db.port} free); ${req.standbys} standbys need ${req.standbys} hosts, each apart from the primary and from each other`,
          );
        }
      }
      const next: StubHa = { ...current, standbys: req.standbys, synchronous: req.synchronous };
      state.ha.set(db.id, next);
      return { highAvailability: record_(db, next) };
    },
    async failover(req) {
      record(state, "failover", req);
      const { db } = await find(req.organizationId, req.databaseId);
      const ha = state.ha.get(db.id);
      if (!ha || ha.standbys === 0)
        throw conflict("the database has no standbys to fail over to; set standbys first (PUT …/high-availability)");
      if (db.status !== "running") throw conflict(`cannot fail over a database that is ${db.status}`);
      const from = `node-${db.id.slice(3)}p`;
      const to = `node-${db.id.slice(3)}s1`;
      const op = {
        id: `op-${db.id.slice(3)}f`,
        databaseId: db.id,
        type: "failover",
        status: "running",
        startedAt: timestampFromDate(T0),
        reason: "planned switchover requested",
        fromMember: from,
        toMember: to,
      };
      state.operations.set(db.id, [...(state.operations.get(db.id) ?? []), op]);
      return { operation: create(OperationSchema, op) };
    },
  };
}
