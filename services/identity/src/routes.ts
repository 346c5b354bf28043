import type { ConnectRouter } from "@connectrpc/connect";
import { IdentityService } from "@dbaas/proto/identity";
import type { AppContext } from "./context.ts";
import { createApiKey, listApiKeys, revokeApiKey } from "./handlers/api-keys.ts";
import { authenticate } from "./handlers/authenticate.ts";
import { createToken } from "./handlers/create-token.ts";
import { acceptInvitation } from "./handlers/accept-invitation.ts";
import { cancelInvitation, createInvitation, listInvitations } from "./handlers/invitations.ts";
import { listMembers, removeMember, transferOwnership, updateMember } from "./handlers/members.ts";
import { notifyOrganization } from "./handlers/notify-organization.ts";
import { deleteOrganization, getOrganization, updateOrganization } from "./handlers/organizations.ts";
import { ackRevocation, watchRevocations } from "./handlers/revocations.ts";
import { signup } from "./handlers/signup.ts";

export const routes =
  (ctx: AppContext, opts: { heartbeatMs?: number } = {}) =>
  (router: ConnectRouter) =>
    router.service(IdentityService, {
      signup: signup(ctx),
      createToken: createToken(ctx),
      authenticate: authenticate(ctx),
      createApiKey: createApiKey(ctx),
      listApiKeys: listApiKeys(ctx),
      revokeApiKey: revokeApiKey(ctx),
      getOrganization: getOrganization(ctx),
      updateOrganization: updateOrganization(ctx),
      deleteOrganization: deleteOrganization(ctx),
      listMembers: listMembers(ctx),
      updateMember: updateMember(ctx),
      removeMember: removeMember(ctx),
      transferOwnership: transferOwnership(ctx),
      createInvitation: createInvitation(ctx),
      listInvitations: listInvitations(ctx),
      cancelInvitation: cancelInvitation(ctx),
      acceptInvitation: acceptInvitation(ctx),
      watchRevocations: watchRevocations(ctx, opts.heartbeatMs),
      ackRevocation: ackRevocation(ctx),
      notifyOrganization: notifyOrganization(ctx),
    });
