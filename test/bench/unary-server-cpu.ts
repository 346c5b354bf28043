/**
 * Server CPU per unary Connect call: a separate server process (startServer,
 * a trivial GetDatabase) answers N calls at concurrency C from a connect-node
 * client over one HTTP/2 session; the server reports process.cpuUsage() spent
 * between the client's "begin" and "end". Run: npx tsx test/bench/unary-server-cpu.ts [N] [C]
 * (PROF=<dir> writes a CPU profile of the server process there).
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createLogger, internalCredentialInterceptor, startServer } from "@dbaas/kit";
import { DatabasesService } from "@dbaas/proto/databases";

const SECRET = "bench-secret";

async function serve(): Promise<void> {
  const log = createLogger("bench");
  const server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log,
    routes: (r) =>
      r.rpc(DatabasesService.method.getDatabase, (req) => ({
        database: { id: req.id, organizationId: req.organizationId, name: "orders", region: "eu-west", tier: "small", port: 5432 },
      })),
  });
  let cpuStart = process.cpuUsage();
  process.on("message", (msg: string) => {
    if (msg === "begin") {
      cpuStart = process.cpuUsage();
      process.send!("ok");
    } else if (msg === "end") {
      const used = process.cpuUsage(cpuStart);
      process.send!({ cpuUs: used.user + used.system });
      void server.close().then(() => process.exit(0));
    }
  });
  process.send!({ port: server.port });
}

function ask<T>(child: ReturnType<typeof fork>, msg: string): Promise<T> {
  return new Promise((resolve) => {
    child.once("message", (m) => resolve(m as T));
    child.send(msg);
  });
}

async function drive(total: number, concurrency: number): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ["serve"], {
    execArgv: ["--import", "tsx", ...(process.env.PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.PROF}`] : [])],
  });
  const { port } = await new Promise<{ port: number }>((resolve) => child.once("message", (m) => resolve(m as { port: number })));
  const transport = createConnectTransport({
    baseUrl: `http://127.0.0.1:${port}`,
    httpVersion: "2",
    useBinaryFormat: true,
    interceptors: [internalCredentialInterceptor(SECRET, "bench")],
  });
  const client = createClient(DatabasesService, transport);
  const run = async (n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < n) await client.getDatabase({ organizationId: "org-1", id: "db-1" }, { timeoutMs: 10_000 });
      }),
    );
  };
  await run(2_000);
  await ask(child, "begin");
  const t0 = performance.now();
  await run(total);
  const wallMs = performance.now() - t0;
  const { cpuUs } = await ask<{ cpuUs: number }>(child, "end");
  console.log(
    JSON.stringify({
      calls: total,
      concurrency,
      serverCpuUsPerCall: +(cpuUs / total).toFixed(1),
      callsPerSec: Math.round(total / (wallMs / 1000)),
    }),
  );
}

if (process.argv[2] === "serve") await serve();
else await drive(Number(process.argv[2] ?? 20_000), Number(process.argv[3] ?? 50));
