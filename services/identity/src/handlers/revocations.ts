import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import {
  AckRevocationResponseSchema,
  RevocationSchema,
  WatchRevocationsResponseSchema,
  type AckRevocationRequest,
  type AckRevocationResponse,
  type WatchRevocationsRequest,
  type WatchRevocationsResponse,
} from "@dbaas/proto/identity";
import type { AppContext } from "../context.ts";

/** How often a quiet stream says it is alive; subscribers give up on a stream silent for much longer. */
export const HEARTBEAT_MS = 10_000;

export function watchRevocations(ctx: AppContext, heartbeatMs = HEARTBEAT_MS) {
  return async function* (_req: WatchRevocationsRequest, call: HandlerContext): AsyncGenerator<WatchRevocationsResponse> {
    const sub = ctx.revocations.subscribe();
    if (!sub) throw new ConnectError("revocation feed is not available yet", Code.Unavailable);
    try {
      yield create(WatchRevocationsResponseSchema, { event: { case: "subscribed", value: { subscriptionId: sub.id } } });
      for (;;) {
        const next = await sub.next(heartbeatMs, call.signal);
        if (next === "aborted") return;
        // The subscriber may have missed revocations: it must reconnect and start afresh.
        if (next === "closed") throw new ConnectError("revocation feed interrupted", Code.Unavailable);
        yield create(
          WatchRevocationsResponseSchema,
          next === "idle"
            ? { event: { case: "heartbeat", value: {} } }
            : { event: { case: "revocation", value: create(RevocationSchema, next.revocation) }, seq: BigInt(next.seq) },
        );
      }
    } finally {
      sub.close();
    }
  };
}

/** The subscriber has applied its subscription's revocations up to `seq`: the revoking calls waiting on it go on. */
export function ackRevocation(ctx: AppContext) {
  return async (req: AckRevocationRequest): Promise<AckRevocationResponse> => {
    ctx.revocations.ack(req.subscriptionId, Number(req.seq));
    return create(AckRevocationResponseSchema, {});
  };
}
