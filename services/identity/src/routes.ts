import type { ConnectRouter } from "@connectrpc/connect";
import { IdentityService } from "@dbaas/proto/identity";
import type { AppContext } from "./context.ts";
import { createApiKey, listApiKeys, revokeApiKey } from "./handlers/api-keys.ts";
import { authenticate } from "./handlers/authenticate.ts";
import { createToken } from "./handlers/create-token.ts";
import { getOrganization } from "./handlers/organizations.ts";
import { signup } from "./handlers/signup.ts";

export const routes = (ctx: AppContext) => (router: ConnectRouter) =>
  router.service(IdentityService, {
    signup: signup(ctx),
    createToken: createToken(ctx),
    authenticate: authenticate(ctx),
    createApiKey: createApiKey(ctx),
    listApiKeys: listApiKeys(ctx),
    revokeApiKey: revokeApiKey(ctx),
    getOrganization: getOrganization(ctx),
  });
