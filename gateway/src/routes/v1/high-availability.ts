import { Type } from "@sinclair/typebox";
import { accepted, ok, type Reply } from "../../middleware/envelope.ts";
import { body, type Infer } from "../../schema.ts";
import { present } from "../mappers.ts";
import { HIGH_AVAILABILITY, OPERATION } from "../responses.ts";
import type { AuthedCall } from "../route.ts";

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

const target = (call: AuthedCall<unknown>) => ({ organizationId: call.principal.organizationId, databaseId: call.params.id });

export async function getHighAvailability(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.getHighAvailability(target(call));
  return ok(HIGH_AVAILABILITY.map(present(res.highAvailability, "high availability")));
}

export async function setHighAvailability(call: AuthedCall<Infer<typeof setBody>>): Promise<Reply> {
  const res = await call.ctx.databases.setHighAvailability({
    ...target(call),
    standbys: call.body.standbys,
    synchronous: call.body.synchronous,
  });
  return ok(HIGH_AVAILABILITY.map(present(res.highAvailability, "high availability")));
}

/** 202: the switchover runs on after the answer; its operation says `running` until the standby runs as the primary. */
export async function failover(call: AuthedCall<unknown>): Promise<Reply> {
  const res = await call.ctx.databases.failover(target(call));
  return accepted(OPERATION.map(present(res.operation, "operation")));
}
