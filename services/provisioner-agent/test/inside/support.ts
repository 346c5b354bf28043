import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { createLogger } from "@dbaas/kit";
import { InstanceAdminService } from "@dbaas/proto/instance-admin";
import { instanceAdmin } from "../../src/handlers/instance-admin.ts";
import type { InstanceRuntime } from "../../src/runtime.ts";

/** An InstanceAdminService client over the handlers of an agent whose runtime is `runtime` (in process). */
export function adminClient(runtime: InstanceRuntime): Client<typeof InstanceAdminService> {
  const impl = instanceAdmin({ runtime, log: createLogger("agent-test") });
  return createClient(
    InstanceAdminService,
    createRouterTransport((router) => router.service(InstanceAdminService, impl)),
  );
}
