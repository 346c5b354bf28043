import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { BillingService } from "@dbaas/proto/billing";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { AuthenticateRequestSchema, IdentityService } from "@dbaas/proto/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  callerKey,
  createLogger,
  internalCredentialInterceptor,
  invalidArgument,
  mintInternalToken,
  startServer,
  type RunningServer,
} from "../src/index.ts";

// The fast path of unary-server.ts must be invisible to every client: each
// case runs through a connect-node client (binary: the fast path), a JSON one
// and a gRPC one (both through connect-node's adapter), and compares. Raw
// HTTP/2 requests compare the bytes themselves: the same request with a query
// string (connect ignores it, but it keeps the call off the fast path) is the
// adapter's answer to hold the fast path's against.

const SECRET = "unary-server-test-secret";
const READ_MAX_BYTES = 4096;
const SERVICE_PATH = "/dbaas.identity.v1.IdentityService/Authenticate";

/** What the implementation saw, per call, keyed by the bearer the test sent. */
const seen = new Map<string, { signal: AbortSignal; caller: string; reason?: unknown }>();
/** Resolves when the call with that bearer has reached the implementation. */
const arrived = new Map<string, () => void>();

function reached(bearer: string): Promise<void> {
  return new Promise((resolve) => arrived.set(bearer, resolve));
}

/** Bearers select behaviour: "ok…" answers, "invalid" fails validation, "wait…" waits for ctx.signal. */
async function authenticate(req: { bearer: string }, ctx: HandlerContext) {
  const entry: { signal: AbortSignal; caller: string; reason?: unknown } = { signal: ctx.signal, caller: ctx.values.get(callerKey) };
  seen.set(req.bearer, entry);
  arrived.get(req.bearer)?.();
  if (req.bearer === "invalid") throw invalidArgument([{ field: "bearer", message: "is malformed" }]);
  if (req.bearer === "crash") throw new Error("boom");
  // HTTP/2 forbids connection-specific headers: writing the answer itself fails.
  if (req.bearer === "bad-header") ctx.responseHeader.set("connection", "close");
  // Heeds no signal: only the server's own deadline can end the call in time.
  if (req.bearer === "stuck") await new Promise((resolve) => setTimeout(resolve, 20_000).unref());
  if (req.bearer.startsWith("wait")) {
    entry.reason = await new Promise((resolve) => ctx.signal.addEventListener("abort", () => resolve(ctx.signal.reason)));
    throw entry.reason;
  }
  ctx.responseHeader.set("x-answer", "42");
  ctx.responseTrailer.set("x-served-by", "unary-test");
  return { principal: { userId: entry.caller, organizationId: req.bearer.startsWith("ok-big") ? "o".repeat(3000) : "org-1" } };
}

let server: RunningServer;

beforeAll(async () => {
  server = await startServer({
    port: 0,
    internalSecret: SECRET,
    log: createLogger("unary-server-test"),
    readMaxBytes: READ_MAX_BYTES,
    routes: (router) => router.service(IdentityService, { authenticate }),
  });
});

afterAll(async () => {
  await server?.close();
});

type Flavour = "connect-binary" | "connect-json" | "grpc";
const flavours: Flavour[] = ["connect-binary", "connect-json", "grpc"];

function client(
  flavour: Flavour,
  interceptors: Interceptor[] = [internalCredentialInterceptor(SECRET, "tester")],
): Client<typeof IdentityService> {
  const baseUrl = server.url;
  const transport =
    flavour === "grpc"
      ? createGrpcTransport({ baseUrl, interceptors })
      : createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: flavour === "connect-binary", interceptors });
  return createClient(IdentityService, transport);
}

async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

describe("unary calls answer the same on every protocol", () => {
  it.each(flavours)("success with response header and trailer (%s)", async (flavour) => {
    const bearer = `ok-${flavour}`;
    let header: Headers | undefined;
    let trailer: Headers | undefined;
    const res = await client(flavour).authenticate({ bearer }, { onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) });
    expect(res.principal).toMatchObject({ userId: "tester", organizationId: "org-1" });
    expect(header?.get("x-answer")).toBe("42");
    expect(trailer?.get("x-served-by")).toBe("unary-test");
    // connect-node aborts ctx.signal when every call ends; the fast path only when a call fails.
    expect(seen.get(bearer)?.signal.aborted).toBe(flavour !== "connect-binary");
  });

  it.each(flavours)("a ConnectError keeps its code, message and details (%s)", async (flavour) => {
    const err = await failure(client(flavour).authenticate({ bearer: "invalid" }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toBe("request failed validation");
    expect(err.findDetails(FieldViolationSchema)).toEqual([expect.objectContaining({ field: "bearer", message: "is malformed" })]);
  });

  it.each(flavours)("an unexpected exception is an internal error (%s)", async (flavour) => {
    const err = await failure(client(flavour).authenticate({ bearer: "crash" }));
    expect([err.code, err.rawMessage]).toEqual([Code.Internal, "internal error"]);
  });

  it.each(flavours)("a method the service does not implement is unimplemented (%s)", async (flavour) => {
    const err = await failure(client(flavour).signup({}));
    expect([err.code, err.rawMessage]).toEqual([Code.Unimplemented, "dbaas.identity.v1.IdentityService.Signup is not implemented"]);
  });

  it.each(flavours)("a service the server does not serve is unimplemented (%s)", async (flavour) => {
    const baseUrl = server.url;
    const interceptors = [internalCredentialInterceptor(SECRET, "tester")];
    const transport =
      flavour === "grpc"
        ? createGrpcTransport({ baseUrl, interceptors })
        : createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: flavour === "connect-binary", interceptors });
    const err = await failure(createClient(BillingService, transport).getUsage({ organizationId: "org-1" }));
    expect(err.code).toBe(Code.Unimplemented);
  });

  it.each(flavours)("a missing or forged internal credential is unauthenticated (%s)", async (flavour) => {
    const forged: Interceptor = (next) => (req) => {
      req.header.set("x-dbaas-internal-auth", mintInternalToken("another-secret", "tester"));
      return next(req);
    };
    for (const c of [client(flavour, []), client(flavour, [forged])]) {
      const err = await failure(c.authenticate({ bearer: "ok" }));
      expect([err.code, err.rawMessage]).toEqual([Code.Unauthenticated, "missing or invalid internal credential"]);
    }
  });

  it.each(flavours)("a deadline that passes is deadline_exceeded (%s)", async (flavour) => {
    const err = await failure(client(flavour).authenticate({ bearer: `wait-deadline-${flavour}` }, { timeoutMs: 150 }));
    expect(err.code).toBe(Code.DeadlineExceeded);
    await expect.poll(() => seen.get(`wait-deadline-${flavour}`)?.signal.aborted).toBe(true);
  });

  it.each(flavours)("a client that cancels aborts ctx.signal with canceled (%s)", async (flavour) => {
    const bearer = `wait-cancel-${flavour}`;
    const abort = new AbortController();
    const there = reached(bearer);
    const call = failure(client(flavour).authenticate({ bearer }, { signal: abort.signal }));
    await there;
    abort.abort();
    expect((await call).code).toBe(Code.Canceled);
    await expect.poll(() => seen.get(bearer)?.reason).toBeInstanceOf(ConnectError);
    expect((seen.get(bearer)!.reason as ConnectError).code).toBe(Code.Canceled);
  });

  it.each(flavours)("a request over readMaxBytes is resource_exhausted (%s)", async (flavour) => {
    const err = await failure(client(flavour).authenticate({ bearer: "ok".repeat(READ_MAX_BYTES) }));
    expect(err.code).toBe(Code.ResourceExhausted);
  });

  it("remembers a verified credential only until it expires", async () => {
    // Minted 59 s ago: valid for at most one more second.
    const token = mintInternalToken(SECRET, "tester", Date.now() - 59_000);
    const expiry = Number(token.split(".")[2]) * 1000;
    const withToken =
      (t: string): Interceptor =>
      (next) =>
      (req) => {
        req.header.set("x-dbaas-internal-auth", t);
        return next(req);
      };
    const c = client("connect-binary", [withToken(token)]);
    expect((await c.authenticate({ bearer: "ok-soon-expired" })).principal?.userId).toBe("tester");
    const forgedTwin = token.replace(/\.[^.]+$/, ".AAAA" + token.slice(-39));
    expect((await failure(client("connect-binary", [withToken(forgedTwin)]).authenticate({ bearer: "ok" }))).code).toBe(
      Code.Unauthenticated,
    );
    await new Promise((r) => setTimeout(r, expiry - Date.now() + 50));
    expect((await failure(c.authenticate({ bearer: "ok-expired" }))).code).toBe(Code.Unauthenticated);
  });
});

interface RawResponse {
  status: number;
  headers: Record<string, unknown>;
  body: Buffer;
}

/** One raw HTTP/2 request; returns status, headers (without `date`) and body bytes. */
async function raw(path: string, headers: http2.OutgoingHttpHeaders, body: Uint8Array): Promise<RawResponse> {
  const session = http2.connect(server.url);
  try {
    return await new Promise<RawResponse>((resolve, reject) => {
      const req = session.request({ ":method": "POST", ":path": path, ...headers });
      const chunks: Buffer[] = [];
      let status = 0;
      let got: Record<string, unknown> = {};
      req.on("response", (h) => {
        const { ":status": s, date: _date, ...rest } = h;
        status = Number(s);
        got = { ...rest };
      });
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve({ status, headers: got, body: Buffer.concat(chunks) }));
      req.on("error", reject);
      req.end(body);
    });
  } finally {
    session.close();
  }
}

describe("bytes on the wire match connect-node's", () => {
  const credential = () => ({ "x-dbaas-internal-auth": mintInternalToken(SECRET, "tester") });
  const request = (bearer: string) => toBinary(AuthenticateRequestSchema, create(AuthenticateRequestSchema, { bearer }));
  const proto = { "content-type": "application/proto", "connect-protocol-version": "1" };

  const cases: Array<[string, http2.OutgoingHttpHeaders, Uint8Array, number]> = [
    ["success", { ...proto, ...credential() }, request("ok-wire"), 200],
    ["success without protocol version", { "content-type": "application/proto", ...credential() }, request("ok-wire"), 200],
    ["large answer, compressed", { ...proto, "accept-encoding": "gzip,br", ...credential() }, request("ok-big"), 200],
    ["error details", { ...proto, ...credential() }, request("invalid"), 400],
    ["unauthenticated", proto, request("ok-wire"), 401],
    ["server-side deadline", { ...proto, "connect-timeout-ms": "50", ...credential() }, request("wait-raw"), 504],
    ["invalid timeout", { ...proto, "connect-timeout-ms": "soon", ...credential() }, request("ok-wire"), 400],
    ["undecodable body", { ...proto, ...credential() }, Uint8Array.of(0x0a, 0x05, 0x61), 500],
    ["declared length over readMaxBytes", { ...proto, "content-length": "5000", ...credential() }, new Uint8Array(5000), 429],
    ["body over readMaxBytes", { ...proto, ...credential() }, request("x".repeat(READ_MAX_BYTES)), 429],
  ];

  it.each(cases)("%s", async (_name, headers, body, status) => {
    const fast = await raw(SERVICE_PATH, headers, body);
    const adapter = await raw(`${SERVICE_PATH}?path=adapter`, headers, body);
    expect(fast.status).toBe(status);
    expect(fast.status).toBe(adapter.status);
    expect(fast.headers).toEqual(adapter.headers);
    expect(fast.body.toString("base64")).toBe(adapter.body.toString("base64"));
  });

  it("the caller's deadline is answered (504 deadline_exceeded) even when the handler ignores its signal", async () => {
    const started = performance.now();
    const res = await raw(SERVICE_PATH, { ...proto, "connect-timeout-ms": "300", ...credential() }, request("stuck"));
    expect([res.status, JSON.parse(res.body.toString()).code]).toEqual([504, "deadline_exceeded"]);
    // The handler takes 20 s; the answer must not wait for it (bound generous for a loaded machine).
    expect(performance.now() - started).toBeLessThan(10_000);
  }, 30_000);

  it("an answer HTTP/2 refuses to write is an internal error, not a reset stream", async () => {
    const res = await raw(SERVICE_PATH, { ...proto, ...credential() }, request("bad-header"));
    expect([res.status, res.headers["content-type"], JSON.parse(res.body.toString())]).toEqual([
      500,
      "application/json",
      { code: "internal", message: "internal error" },
    ]);
  });

  it("carries trailers as trailer- headers and compresses large answers", async () => {
    const small = await raw(SERVICE_PATH, { ...proto, "accept-encoding": "gzip", ...credential() }, request("ok-wire"));
    expect(small.headers).toMatchObject({ "content-type": "application/proto", "x-answer": "42", "trailer-x-served-by": "unary-test" });
    expect(small.headers["content-encoding"]).toBeUndefined();
    const large = await raw(SERVICE_PATH, { ...proto, "accept-encoding": "gzip", ...credential() }, request("ok-big"));
    expect(large.headers["content-encoding"]).toBe("gzip");
  });
});

describe("shutdown", () => {
  it("aborts ctx.signal of calls in flight and still lets them answer", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const signals: AbortSignal[] = [];
    const closing = await startServer({
      port: 0,
      internalSecret: SECRET,
      log: createLogger("unary-server-test"),
      routes: (router) =>
        router.rpc(IdentityService.method.authenticate, async (req, ctx) => {
          signals.push(ctx.signal);
          await gate;
          return { principal: { userId: req.bearer } };
        }),
    });
    const interceptors = [internalCredentialInterceptor(SECRET, "tester")];
    const binary = createClient(IdentityService, createConnectTransport({ baseUrl: closing.url, httpVersion: "2", interceptors }));
    const json = createClient(
      IdentityService,
      createConnectTransport({ baseUrl: closing.url, httpVersion: "2", useBinaryFormat: false, interceptors }),
    );
    const calls = [binary.authenticate({ bearer: "binary" }), json.authenticate({ bearer: "json" })];
    await expect.poll(() => signals.length).toBe(2);
    const closed = closing.close();
    expect(signals.map((s) => s.aborted)).toEqual([true, true]);
    release();
    expect((await Promise.all(calls)).map((r) => r.principal?.userId)).toEqual(["binary", "json"]);
    await closed;
  });
});
