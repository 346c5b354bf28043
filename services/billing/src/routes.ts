import type { ConnectRouter } from "@connectrpc/connect";
import { BillingService } from "@dbaas/proto/billing";
import type { AppContext } from "./context.ts";
import { getUsage } from "./handlers/get-usage.ts";
import { recordStatusEvents } from "./handlers/record-status-events.ts";

export const routes = (ctx: AppContext) => (router: ConnectRouter) =>
  router.service(BillingService, {
    recordStatusEvents: recordStatusEvents(ctx),
    getUsage: getUsage(ctx),
  });
