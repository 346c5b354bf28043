import { create } from "@bufbuild/protobuf";
import { notFound } from "@dbaas/kit";
import { GetCaCertificateResponseSchema, type GetCaCertificateRequest, type GetCaCertificateResponse } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { caCertificateOf } from "../db/agents.ts";

/** The CA that signed the database's server certificate: its host agent's (for sslmode=verify-full). */
export function getCaCertificate(ctx: AppContext) {
  return async (req: GetCaCertificateRequest): Promise<GetCaCertificateResponse> => {
    const pem = await caCertificateOf(ctx.pool, req.organizationId, req.id);
    if (pem === undefined) throw notFound("database");
    return create(GetCaCertificateResponseSchema, { pem });
  };
}
