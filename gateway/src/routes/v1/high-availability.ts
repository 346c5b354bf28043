import type { HighAvailability } from "@dbaas/proto/databases";
import { Type } from "@sinclair/typebox";
import { accepted, ok, type Reply } from "../../middleware/envelope.ts";
import { body, type Infer } from "../../schema.ts";
import { haMemberRole, iso, memberStatusName, present } from "../mappers.ts";
import type { AuthedCall } from "../route.ts";
import { operation } from "./databases.ts";

/** PUT …/high-availability: both fields required (a PUT states the whole setting). */
export const setBody = body({
  standbys: Type.Integer({
    minimum: 0,
    maximum: 2,
    description:
      "Standbys to keep: 0, 1 or 2, each a streaming replica on another host of the database's region at its port, " +
      "not reachable by clients, billed as compute at the database's tier.",
  }),
  synchronous: Type.Boolean({
    description:
      "true: a commit returns only once a standby has its WAL, so a failover loses no acknowledged commit (needs at least 1 standby).",
  }),
});

/** The record as every route shows it: the primary first, then the standbys. */
export function highAvailabilityRecord(ha: HighAvailability) {
  return {
    standbys: ha.standbys,
    synchronous: ha.synchronous,
    members: ha.members.map((m) => ({
      id: m.id,
      role: haMemberRole(m.role),
      status: memberStatusName(m.status),
      region: m.region,
      lag_bytes: Number(m.lagBytes),
    })),
    last_failover: ha.lastFailover
      ? { at: iso(ha.lastFailover.at), reason: ha.lastFailover.reason, from: ha.lastFailover.fromMember, to: ha.lastFailover.toMember }
      : null,
  };
}

const target = (call: AuthedCall<unknown>) => ({ organizationId: call.principal.organizationId, databaseId: call.params.id });

export async function getHighAvailability(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.getHighAvailability(target(call));
  return ok(highAvailabilityRecord(present(res.highAvailability, "high availability")));
}

export async function setHighAvailability(call: AuthedCall<Infer<typeof setBody>>): Promise<Reply> {
  const res = await call.ctx.databases.setHighAvailability({
    ...target(call),
    standbys: call.body.standbys,
    synchronous: call.body.synchronous,
  });
  return ok(highAvailabilityRecord(present(res.highAvailability, "high availability")));
}

/** 202: the switchover runs on after the answer; its operation says `running` until the standby runs as the primary. */
export async function failover(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.failover(target(call));
  return accepted(operation(present(res.operation, "operation")));
}
