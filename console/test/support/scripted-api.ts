/**
 * The API as the console's component tests see it: a local HTTP server answering with the API's envelopes by
 * route, so each form runs with its real client (sdks/node) over real HTTP. The browser tests run the same
 * pages against the real stack.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll } from "vitest";

export interface Seen {
  method: string;
  path: string;
  body: any;
}

export const ok = (data: unknown) => ({ data, meta: { request_id: "r" } });

export const list = (key: string, items: unknown[]) => ({
  data: { [key]: items },
  meta: { request_id: "r", page: 1, per_page: 100, total: items.length, total_pages: 1 },
});

export const problem = (code: string, message: string, details: Array<{ field: string; message: string }> = []) => ({
  error: { code, message, details },
  meta: { request_id: "r" },
});

/**
 * Starts the server before the file's tests (the page's URL set to `pagePath` on it) and forgets what it saw
 * and was told after each test. `answer(route, …)` queues an answer for `METHOD /path` (without the query; `routes` holds them, for a test to drop some):
 * each is used once, in order, and the last one repeats; a route with none answers 500.
 */
export function scriptedApi(pagePath: string) {
  let server: Server;
  const seen: Seen[] = [];
  const routes = new Map<string, Array<{ status: number; body?: unknown }>>();
  const answer = (route: string, status: number, body?: unknown) => routes.set(route, [...(routes.get(route) ?? []), { status, body }]);

  beforeAll(async () => {
    server = createServer((req, res) => {
      let raw = "";
      req.on("data", (c) => (raw += c));
      req.on("end", () => {
        const path = req.url!.split("?")[0]!;
        seen.push({ method: req.method!, path, body: raw ? JSON.parse(raw) : undefined });
        const queued = routes.get(`${req.method} ${path}`);
        const a = queued?.length ? (queued.length > 1 ? queued.shift()! : queued[0]!) : undefined;
        const status = a?.status ?? 500;
        res.writeHead(status, { "content-type": "application/json" });
        res.end(status === 204 ? undefined : JSON.stringify(a?.body ?? problem("internal_error", `nothing for ${req.method} ${path}`)));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    (window as any).happyDOM.setURL(`http://127.0.0.1:${(server.address() as AddressInfo).port}${pagePath}`);
  });
  afterEach(() => {
    seen.length = 0;
    routes.clear();
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  return { seen, answer, routes };
}
