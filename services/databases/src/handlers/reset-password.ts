import { create } from "@bufbuild/protobuf";
import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import { notConfirmedInTime, withTransaction } from "@dbaas/kit";
import { ResetPasswordResponseSchema, type ResetPasswordRequest, type ResetPasswordResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { NOT_CONFIRMED, waitForCredentials } from "../credentials.ts";
import { lockOwned, setReplicaVerifiers, setVerifier } from "../db/databases.ts";
import { notifyAgent } from "../db/notify.ts";
import { transitionFrom } from "../lifecycle.ts";
import { connectionString } from "../mappers.ts";
import { newCredentials } from "../scram.ts";

/**
 * A new password: its verifier is committed and handed to the agent, and the
 * call answers once the agent confirms it applied it. When it does not in time,
 * the answer is DEADLINE_EXCEEDED (the API's 504) saying what happened — never
 * UNAVAILABLE: the new verifier is committed, and a client resending the call
 * would rotate the password again.
 */
export function resetPassword(ctx: AppContext) {
  return async (req: ResetPasswordRequest, handlerCtx: HandlerContext): Promise<ResetPasswordResponse> => {
    const { password, verifier } = newCredentials(ctx.cfg.scramIterations);
    const row = await withTransaction(ctx.pool, async (db) => {
      const current = await lockOwned(db, req.organizationId, req.id);
      transitionFrom("reset-password", current.status);
      const updated = await setVerifier(db, req.id, verifier);
      await notifyAgent(db, current.agent_id);
      for (const agent of await setReplicaVerifiers(db, req.id, verifier)) if (agent !== current.agent_id) await notifyAgent(db, agent);
      return updated;
    });
    try {
      await waitForCredentials(ctx, row, handlerCtx);
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      // The verifier is committed: losing PostgreSQL now must not read as a call that did not run.
      ctx.log.error("could not wait for a new password to be confirmed", { database_id: row.id, error: err });
      throw notConfirmedInTime(NOT_CONFIRMED);
    }
    return create(ResetPasswordResponseSchema, {
      password,
      connectionString: connectionString(row, ctx.cfg.databaseDomain, password),
    });
  };
}
