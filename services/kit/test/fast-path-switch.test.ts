import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { IdentityService } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, createInternalClient, createLogger, invalidArgument, startServer, type RunningServer } from "../src/index.ts";
import { internalRpcFastPath } from "../src/fast-path.ts";

// INTERNAL_RPC_FAST_PATH=0 serves and sends internal calls through
// connect-node alone. The same calls through both paths must give callers the
// same results; the few things that tell the paths apart (ctx.signal after a
// success, the client's accept-encoding) show the switch really switched.

const SECRET = "fast-path-switch-secret";

interface Seen {
  signal: AbortSignal;
  acceptEncoding: string | null;
}
const seen = new Map<string, Seen>();

async function authenticate(req: { bearer: string }, ctx: HandlerContext) {
  seen.set(req.bearer, { signal: ctx.signal, acceptEncoding: ctx.requestHeader.get("accept-encoding") });
  if (req.bearer.startsWith("invalid")) {
    ctx.responseTrailer.set("x-why", "bad bearer");
    throw invalidArgument([{ field: "bearer", message: "is malformed" }]);
  }
  if (req.bearer.startsWith("crash")) throw new Error("boom");
  if (req.bearer.startsWith("wait")) {
    await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
    throw ctx.signal.reason;
  }
  ctx.responseHeader.set("x-answer", "42");
  ctx.responseTrailer.set("x-served-by", "switch-test");
  return { principal: { userId: req.bearer, organizationId: "org-1" } };
}

async function* watchRevocations() {
  for (let i = 0; i < 3; i++) yield { event: { case: "revocation" as const, value: { organizationId: `org-${i}` } } };
}

const servers: RunningServer[] = [];

async function serve(fastPath: boolean | undefined): Promise<RunningServer> {
  const server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: createLogger("fast-path-switch"),
    fastPath,
    routes: (router) => router.service(IdentityService, { authenticate, watchRevocations }),
  });
  servers.push(server);
  return server;
}

let fast: RunningServer;
let stock: RunningServer;

beforeAll(async () => {
  fast = await serve(true);
  stock = await serve(false);
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

type Client = ReturnType<typeof createInternalClient<typeof IdentityService>>;

/** What a caller can observe of one call, success or failure alike. */
async function observe(client: Client, bearer: string, timeoutMs?: number) {
  let header: Headers | undefined;
  let trailer: Headers | undefined;
  try {
    const res = await client.authenticate({ bearer }, { timeoutMs, onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) });
    return { principal: res.principal, answer: header?.get("x-answer"), servedBy: trailer?.get("x-served-by") };
  } catch (err) {
    const ce = ConnectError.from(err);
    return {
      code: Code[ce.code],
      message: ce.rawMessage,
      details: ce.findDetails(FieldViolationSchema).map((v) => [v.field, v.message]),
      why: ce.metadata.get("x-why"),
    };
  }
}

async function streamed(client: Client): Promise<string[]> {
  const got: string[] = [];
  for await (const msg of client.watchRevocations({})) if (msg.event.case === "revocation") got.push(msg.event.value.organizationId);
  return got;
}

describe("INTERNAL_RPC_FAST_PATH", () => {
  it("reads 1 or unset as on, 0 as off, anything else as a configuration error", () => {
    expect([
      internalRpcFastPath({}),
      internalRpcFastPath({ INTERNAL_RPC_FAST_PATH: "1" }),
      internalRpcFastPath({ INTERNAL_RPC_FAST_PATH: "0" }),
    ]).toEqual([true, true, false]);
    expect(() => internalRpcFastPath({ INTERNAL_RPC_FAST_PATH: "off" })).toThrow(ConfigError);
  });

  it("the same calls give the same results through the fast path and connect-node", async () => {
    const run = async (server: RunningServer, fastPath: boolean, tag: string) => {
      const client = createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "tester", fastPath });
      const [ok, invalid, crash, deadline, stream] = await Promise.all([
        observe(client, `ok-${tag}`),
        observe(client, `invalid-${tag}`),
        observe(client, `crash-${tag}`),
        observe(client, `wait-${tag}`, 100),
        streamed(client),
      ]);
      return {
        ok: { ...ok, principal: { ...ok.principal, userId: ok.principal?.userId.replace(tag, "") } },
        invalid,
        crash,
        deadline,
        stream,
      };
    };
    const viaFast = await run(fast, true, "fast");
    const viaStock = await run(stock, false, "stock");
    expect(viaFast).toEqual(viaStock);
    expect(viaFast.ok).toMatchObject({ answer: "42", servedBy: "switch-test" });
    expect(viaFast.invalid).toMatchObject({ code: "InvalidArgument", details: [["bearer", "is malformed"]], why: "bad bearer" });
    expect(viaFast.crash).toMatchObject({ code: "Internal", message: "internal error" });
    expect(viaFast.deadline).toMatchObject({ code: "DeadlineExceeded" });
    expect(viaFast.stream).toEqual(["org-0", "org-1", "org-2"]);
  });

  it("=0 in the environment puts servers and clients on connect-node", async () => {
    const before = process.env.INTERNAL_RPC_FAST_PATH;
    const calls = async (value: string, bearer: string) => {
      process.env.INTERNAL_RPC_FAST_PATH = value;
      try {
        const server = await serve(undefined);
        const client = createInternalClient(IdentityService, server.url, { secret: SECRET, caller: "tester" });
        await client.authenticate({ bearer });
      } finally {
        if (before === undefined) delete process.env.INTERNAL_RPC_FAST_PATH;
        else process.env.INTERNAL_RPC_FAST_PATH = before;
      }
      return seen.get(bearer)!;
    };
    const on = await calls("1", "ok-env-on");
    const off = await calls("0", "ok-env-off");
    // Server: only connect-node aborts ctx.signal after a success. Client: only connect-node's offers compression.
    expect([on.signal.aborted, on.acceptEncoding]).toEqual([false, null]);
    expect([off.signal.aborted, off.acceptEncoding]).toEqual([true, "gzip,br"]);
  });
});
