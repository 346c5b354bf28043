// A session with the Node client: sign up, create a database, wait until it
// runs, connect with the connection string it returned, list, see a typed
// error, delete. Run against a local stack (`npm start`):
//
//   DBAAS_URL=http://127.0.0.1:8080 node sdks/node/examples/quickstart.mjs
//
// Node has no PostgreSQL driver built in (and this client has no dependencies), so the
// connection goes through psql; any driver (`pg`, `postgres`) takes the same string.
import { execFileSync } from "node:child_process";
import { DbaasClient, DbaasError } from "@dbaas/client";

const client = new DbaasClient(); // DBAAS_URL, else http://127.0.0.1:8080

const email = `quickstart-${Date.now()}@example.com`;
const signup = await client.auth.signup({ email, password: "a-long-password", name: "Ada", organization_name: "Quickstart" });
client.setToken(signup.access_token);
console.log(`signed up: ${signup.organization.id}`);

const created = await client.databases.create({ name: "orders", region: "fsn1", tier: "micro" });
console.log(`created: ${created.id} (${created.status})`);

const db = await client.databases.waitForStatus(created.id, "running", { timeoutMs: 120_000 });
console.log(`running: ${db.host}:${db.port}`);

// `*.localhost` names do not resolve everywhere: hostaddr tells libpq where to connect, the name stays for TLS.
const conn = `${created.connection_string}&hostaddr=127.0.0.1`;
const one = execFileSync("psql", [conn, "-XAtc", "SELECT 1"], { encoding: "utf8" }).trim();
console.log(`SELECT 1 -> ${one}`);

for await (const item of client.databases.list()) console.log(`listed: ${item.id} ${item.name} ${item.status}`);
const { rateLimit } = client.lastResponse ?? {};
if (rateLimit) console.log(`rate limit: ${rateLimit.remaining}/${rateLimit.limit} left`);

try {
  await client.databases.create({ name: "x", region: "fsn1", tier: "micro" });
} catch (err) {
  if (!(err instanceof DbaasError)) throw err;
  console.log(`error: ${err.status} ${err.code}: ${err.message} (request ${err.requestId})`);
  for (const d of err.details) console.log(`  ${d.field}: ${d.message}`);
}

await client.databases.delete(created.id);
console.log(`deleted: ${created.id}`);
