import { create } from "@bufbuild/protobuf";
import { Validator } from "@dbaas/kit";
import {
  FailoverResponseSchema,
  GetHighAvailabilityResponseSchema,
  SetHighAvailabilityResponseSchema,
  type FailoverRequest,
  type FailoverResponse,
  type GetHighAvailabilityRequest,
  type GetHighAvailabilityResponse,
  type SetHighAvailabilityRequest,
  type SetHighAvailabilityResponse,
} from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import {
  getHighAvailability as load,
  setHighAvailability as set,
  startSwitchover,
  validateHighAvailability,
} from "../high-availability.ts";
import { toHighAvailability, toOperation } from "../mappers.ts";

/** A database's standbys and mode, its members (primary first) and its last failover. */
export function getHighAvailability(ctx: AppContext) {
  return async (req: GetHighAvailabilityRequest): Promise<GetHighAvailabilityResponse> => {
    const { primary, standbys } = await load(ctx, req.organizationId, req.databaseId);
    return create(GetHighAvailabilityResponseSchema, { highAvailability: toHighAvailability(primary, standbys) });
  };
}

/** Sets the standbys (0-2) and synchronous mode; answers the record with the members as they are now. */
export function setHighAvailability(ctx: AppContext) {
  return async (req: SetHighAvailabilityRequest): Promise<SetHighAvailabilityResponse> => {
    const v = new Validator();
    validateHighAvailability(v, req.standbys, req.synchronous);
    v.throwIfAny();
    const { primary, standbys } = await set(ctx, req.organizationId, req.databaseId, req.standbys, req.synchronous);
    return create(SetHighAvailabilityResponseSchema, { highAvailability: toHighAvailability(primary, standbys) });
  };
}

/** A planned switchover to the healthiest standby; answers its operation (running). */
export function failover(ctx: AppContext) {
  return async (req: FailoverRequest): Promise<FailoverResponse> => {
    const op = await startSwitchover(ctx, req.organizationId, req.databaseId);
    return create(FailoverResponseSchema, { operation: toOperation(op) });
  };
}
