import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { createInternalClient, startServer, type RunningServer } from "@dbaas/kit";
import {
  GetOrganizationResponseSchema,
  IdentityService,
  NotifyOrganizationResponseSchema,
  OrganizationSchema,
  type NotifyOrganizationRequest,
} from "@dbaas/proto/identity";
import { captureLog } from "@dbaas/test/support/log";

const SECRET = "billing-fake-identity-secret";

/**
 * What billing asks of identity (an organization's plan, notices to mail),
 * over real HTTP/2 with internal credentials, answered from plain state: the
 * plan and name of each organization (free and "Org" unless set; `unknown` ones are NOT_FOUND),
 * every notice received, and `failing` for an identity that errs.
 */
export interface FakeIdentity {
  client: Client<typeof IdentityService>;
  plans: Map<string, string>;
  names: Map<string, string>;
  unknown: Set<string>;
  notices: NotifyOrganizationRequest[];
  failing: boolean;
  close(): Promise<void>;
}

export async function startFakeIdentity(): Promise<FakeIdentity> {
  let server: RunningServer | undefined;
  const fake: Omit<FakeIdentity, "client" | "close"> = {
    plans: new Map(),
    names: new Map(),
    unknown: new Set(),
    notices: [],
    failing: false,
  };
  const fail = () => {
    if (fake.failing) throw new ConnectError("identity is having a bad day", Code.Internal);
  };
  server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: captureLog(),
    routes: (router) =>
      router.service(IdentityService, {
        async getOrganization(req) {
          fail();
          if (fake.unknown.has(req.organizationId)) throw new ConnectError("organization not found", Code.NotFound);
          return create(GetOrganizationResponseSchema, {
            organization: create(OrganizationSchema, {
              id: req.organizationId,
              name: fake.names.get(req.organizationId) ?? "Org",
              plan: fake.plans.get(req.organizationId) ?? "free",
            }),
          });
        },
        async notifyOrganization(req) {
          fail();
          fake.notices.push(req);
          return create(NotifyOrganizationResponseSchema, { recipients: 1 });
        },
      }),
  });
  return Object.assign(fake, {
    client: createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "billing" }),
    close: async () => {
      await server?.close();
    },
  });
}
