import { execFile, execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { createApi } from "../test/support/api.ts";
import { createTestDatabase } from "../test/support/pg.ts";
import { startStack } from "../test/support/stack.ts";
const run = promisify(execFile);
const PGBENCH = "/usr/lib/postgresql/15/bin/pgbench";
writeFileSync("/tmp/select1.sql", "SELECT 1;\n");
const meta = await createTestDatabase("exp_refuse");
const stack = await startStack({ databaseUrl: meta.url, env: { REDIS_URL: "redis://127.0.0.1:6379" } });
try {
  const api = createApi(stack.baseUrl);
  const account = await api.signup("exp-refuse");
  api.setToken((await api.post("/v1/auth/token", { email: account.email, password: account.password })).body.data.access_token);
  await api.addPaymentMethod();
  const created = await api.post("/v1/databases", { name: "exp", region: "fsn1", tier: "small" });
  const db = created.body.data;
  for (;;) { const r = await api.get(`/v1/databases/${db.id}`); if (r.body.data.status === "running") break; await new Promise((r) => setTimeout(r, 500)); }
  await new Promise((r) => setTimeout(r, 5000));
  const pooler = (await api.get(`/v1/databases/${db.id}/pooler`)).body.data;
  const P = db.port, P2 = pooler.port;
  console.log(`direct ${P} pooler ${P2}`);
  const bench = async (port: number, extra: string[]) => {
    try {
      const { stdout } = await run(PGBENCH, ["-h", "127.0.0.1", "-p", String(port), "-U", "dbadmin", "-c", "8", "-j", "2", "-n", "-f", "/tmp/select1.sql", ...extra, "defaultdb"], { env: { ...process.env, PGPASSWORD: db.password, PGSSLMODE: "require" }, maxBuffer: 1 << 24 });
      return /tps = ([\d.]+)/.exec(stdout)?.[1] ?? "?";
    } catch (e) {
      const msg = String((e as { stderr?: string }).stderr ?? e).split("\n").slice(0, 2).join(" | ");
      const ss = execFileSync("sh", ["-c", `ss -tanH | awk '{print $1, $4, $5}' | grep -E ':${P}\\b' | awk '{print $1}' | sort | uniq -c`]).toString();
      const listen = execFileSync("sh", ["-c", `ss -tlnpH | grep -E ':${P}\\b' || true`]).toString();
      return `FAILED ${msg}\n  sockets to ${P} by state:\n${ss}  listening on ${P}: ${listen}`;
    }
  };
  for (let i = 0; i < 2; i++) console.log("direct -C", await bench(P, ["-C", "-T", "5"]));
  for (let i = 0; i < 2; i++) console.log("pooled -C", await bench(P2, ["-C", "-T", "5"]));
  for (let i = 0; i < 20; i++) console.log(`direct -C prepared ${i}`, await bench(P, ["-C", "-T", "2", "-M", "prepared"]));
} finally {
  await stack.destroy();
  await meta.drop();
}
