import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import type { Clock, Logger } from "@dbaas/kit";
import { createConformanceChecker } from "@dbaas/test/support/api";
import { createApp } from "../../src/app.ts";
import { readConfig } from "../../src/config.ts";
import { createContext, type GatewayContext } from "../../src/context.ts";
import type { RevocationFeedOptions } from "../../src/auth/revocation-feed.ts";
import { openApiDocument } from "../../src/routes/openapi.ts";
import { ROUTES } from "../../src/routes/table.ts";
import { createGatewayServer } from "../../src/server.ts";
import { SECRET, type Stubs } from "./stubs.ts";

export interface TestGateway {
  url: string;
  ctx: GatewayContext;
  close(): Promise<void>;
}

/** The real app on an ephemeral port, wired to the stubs (or to whatever URLs `env` names). */
export async function startGateway(
  stubs: Pick<Stubs, "identityUrl" | "databasesUrl" | "billingUrl">,
  env: Record<string, string> = {},
  clock?: Clock,
  log?: Logger,
  revocationFeed?: RevocationFeedOptions,
): Promise<TestGateway> {
  const config = readConfig({
    IDENTITY_URL: stubs.identityUrl,
    DATABASES_URL: stubs.databasesUrl,
    BILLING_URL: stubs.billingUrl,
    INTERNAL_AUTH_SECRET: SECRET,
    PORT: "0",
    ...env,
  });
  const ctx = createContext(config, { clock, log, revocationFeed });
  // The server main.ts listens on (malformed HTTP in the envelope, half-closing clients answered).
  const server: Server = createGatewayServer(ctx, createApp(ctx));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    ctx,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await ctx.close();
    },
  };
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON body, or undefined when there is none. */
  body: any;
  text: string;
  /** The body as received, for what is not text (a PDF). */
  bytes: Buffer;
}

export interface RequestOptions {
  method?: string;
  token?: string;
  /** Serialized as JSON unless it is already a string. */
  body?: unknown;
  headers?: Record<string, string>;
  /**
   * false: skip the OpenAPI check, for tests whose stub makes an upstream
   * answer what the real one never does (e.g. any Connect code on a GET).
   */
  conform?: boolean;
}

// Built from the generator rather than fetched, so that checking costs no request
// (rate-limit tests count every one).
const conformance = createConformanceChecker(openApiDocument(ROUTES, "http://gateway.test"));

/**
 * One request; every answer to a /v1 request is checked against the OpenAPI
 * document, as the end-to-end client does. Preflights (OPTIONS) and HEAD are
 * browser and HTTP mechanics, not operations of the API, so they are not.
 */
export async function api(base: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(base + path, { method: opts.method ?? "GET", headers, body });
  const bytes = Buffer.from(await res.arrayBuffer());
  const text = bytes.toString("utf8");
  const isJson = res.headers.get("content-type")?.includes("application/json") ?? false;
  const parsed = isJson && text !== "" ? JSON.parse(text) : undefined;
  const method = opts.method ?? "GET";
  if (opts.conform !== false && path.startsWith("/v1") && method !== "OPTIONS" && method !== "HEAD") {
    conformance.check({ method, path, status: res.status, headers: res.headers, text, body: isJson ? parsed : text });
  }
  return { status: res.status, headers: res.headers, body: parsed, text, bytes };
}

/** Resolves once the gateway's revocation feed is subscribed, i.e. its principal cache is in use. */
export async function waitForRevocationFeed(gw: Pick<TestGateway, "ctx">, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!gw.ctx.authCache.live) {
    if (Date.now() > deadline) throw new Error("the gateway's revocation feed did not come up");
    await new Promise((r) => setTimeout(r, 10));
  }
}
