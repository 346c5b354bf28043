import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { createApi } from "../support/api.ts";
import type { Api } from "../support/backups.ts";
import type { Stack } from "../support/stack.ts";

const run = promisify(execFile);

/**
 * An organization on the internal plan (what support gives our own tooling: the rate limiter never
 * refuses it, so polling does not meet 429s) with a card, so it may run more than the free allowance.
 * set-plan runs from the stack's own checkout (an older tree's, for a baseline stack).
 */
export async function account(stack: Stack, prefix: string): Promise<Api> {
  const api = createApi(stack.baseUrl);
  const signedUp = await api.signup(prefix);
  await run(process.execPath, ["--import", "tsx", "services/identity/src/cli/set-plan.ts", signedUp.organization.id, "internal"], {
    cwd: stack.root,
    env: { ...process.env, IDENTITY_URL: `http://127.0.0.1:${Number(stack.env.PORT) + 1}`, DBAAS_DATA_DIR: stack.dataDir },
  });
  const login = await api.post("/v1/auth/token", { email: signedUp.email, password: signedUp.password });
  api.setToken(login.body.data.access_token);
  await api.addPaymentMethod();
  return api;
}
