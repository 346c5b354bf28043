// @vitest-environment happy-dom
/**
 * The Logs and Queries tabs: their logic (src/logs.ts) and the tabs with the real client (sdks/node) over
 * real HTTP to a local server answering with the API's envelopes (browser-database.test.ts runs the same
 * tabs against the real stack): newest first, older pages from `prev_cursor`, following from
 * `next_cursor` and stopping when the tab closes; queries ordered as asked, reset after a confirmation,
 * a viewer's reset disabled, the API's 409 shown as it words it.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/preact";
import { h } from "preact";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { duration, FOLLOW_MS, followed, type LogEntry, logQuery, newestFirst, ratio } from "../src/logs.ts";

let server: Server;
/** Every request: method, path and query. */
const seen: Array<{ method: string; path: string; query: URLSearchParams }> = [];
/** Answers by `METHOD /path`, decided from the query. */
let respond: (method: string, path: string, query: URLSearchParams) => { status: number; body?: unknown } = () => ({ status: 500 });
const ok = (data: unknown) => ({ status: 200, body: { data, meta: { request_id: "r" } } });

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url!, "http://x");
    seen.push({ method: req.method!, path: url.pathname, query: url.searchParams });
    req.resume();
    req.on("end", () => {
      const a = respond(req.method!, url.pathname, url.searchParams);
      res.writeHead(a.status, { "content-type": "application/json" });
      res.end(
        a.status === 204 ? undefined : JSON.stringify(a.body ?? { error: { code: "internal_error", message: "no answer", details: [] } }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  (window as any).happyDOM.setURL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/databases/db-1`);
});

afterEach(() => {
  cleanup();
  seen.length = 0;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const entry = (message: string, severity = "LOG", time = "2026-11-28T10:00:00Z"): LogEntry => ({
  time,
  severity,
  message,
  detail: null,
  hint: null,
  context: null,
  statement: null,
  sql_state: null,
  user: null,
  database: null,
  application_name: null,
  backend_type: "postmaster",
  pid: 7,
});
const messages = () => [...document.querySelectorAll("[data-testid=log-entries] .log-message")].map((p) => p.textContent);
const logReads = () => seen.filter((s) => s.path === "/v1/databases/db-1/logs");

describe("the logs' and queries' logic", () => {
  it("shows pages given oldest first newest first: a follow read on top, an older page below", () => {
    const [a, b, c, z] = [entry("a"), entry("b"), entry("c"), entry("z")];
    const first = newestFirst([], [a, b], "newer");
    expect(first.map((e) => e.message)).toEqual(["b", "a"]);
    expect(newestFirst(first, [c], "newer").map((e) => e.message)).toEqual(["c", "b", "a"]);
    expect(newestFirst(first, [z], "older").map((e) => e.message)).toEqual(["b", "a", "z"]);
  });

  it("keeps at most the newest entries while following, and says when older ones left the view", () => {
    const shown = newestFirst([], [entry("a"), entry("b"), entry("c")], "newer");
    expect(followed(shown, [entry("d")], 5)).toEqual({ entries: [entry("d"), entry("c"), entry("b"), entry("a")], trimmed: false });
    const over = followed(shown, [entry("d"), entry("e"), entry("f")], 5);
    expect(over.entries.map((e) => e.message)).toEqual(["f", "e", "d", "c", "b"]);
    expect(over.trimmed).toBe(true);
  });

  it("orders by the entries' times, where the log file has processes' entries a few milliseconds apart out of order", () => {
    const at = (message: string, ms: number) => entry(message, "LOG", new Date(Date.UTC(2026, 10, 28, 10, 0, 0, ms)).toISOString());
    // As the API gives them (file order): y was written after x but happened 150 ms before it; t1 and t2 share an instant.
    const page = [at("w", 100), at("x", 647), at("y", 498), at("t1", 700), at("t2", 700)];
    expect(newestFirst([], page, "newer").map((e) => e.message)).toEqual(["t2", "t1", "x", "y", "w"]);
    expect(newestFirst(newestFirst([], page, "newer"), [at("v", 600)], "newer").map((e) => e.message)).toEqual([
      "t2",
      "t1",
      "x",
      "v",
      "y",
      "w",
    ]);
  });

  it("asks only for the filters set, the cursor with them", () => {
    expect(logQuery({ severity: "", q: "  " })).toEqual({ limit: 50 });
    expect(logQuery({ severity: "ERROR", q: " missing " }, "c1")).toEqual({ limit: 50, severity: "ERROR", q: "missing", cursor: "c1" });
    expect(logQuery({ severity: "", q: "" }, null)).toEqual({ limit: 50 });
  });

  it("words times and cache ratios", () => {
    expect(duration(0.4213)).toBe("0.42 ms");
    expect(duration(12.34)).toBe("12.3 ms");
    expect(duration(4560)).toBe("4.56 s");
    expect(ratio(null)).toBe("—");
    expect(ratio(0.9876)).toBe("98.8 %");
  });
});

describe("the logs tab", () => {
  it("newest first; older entries from prev_cursor until the beginning; text searched as the API searches", async () => {
    const { Logs } = await import("../src/pages/insights.tsx");
    respond = (_m, _p, q) => {
      if (q.get("cursor") === "p1") return ok({ entries: [entry("z")], next_cursor: "n0", prev_cursor: "p0" });
      if (q.get("q") === "relation") return ok({ entries: [], next_cursor: "n9", prev_cursor: null });
      return ok({ entries: [entry("a"), entry("b", "ERROR")], next_cursor: "n1", prev_cursor: "p1" });
    };
    render(h(Logs, { db: { id: "db-1" } }));
    await waitFor(() => expect(messages()).toEqual(["b", "a"]));
    expect(document.querySelector("li[data-severity=ERROR] .status-failed")?.textContent).toBe("ERROR");
    expect(document.querySelector("time")?.getAttribute("title")).toBe("2026-11-28 10:00:00 UTC");
    expect(logReads()[0]!.query.get("limit")).toBe("50");
    expect(logReads()[0]!.query.has("cursor")).toBe(false);

    fireEvent.click(screen.getByRole("button", { name: "Load older" }));
    await waitFor(() => expect(messages()).toEqual(["b", "a", "z"]));
    // An older page that is not empty may have more before it.
    expect(screen.getByRole("button", { name: "Load older" })).toBeTruthy();

    fireEvent.input(screen.getByLabelText("Text in the message or statement"), { target: { value: "relation" } });
    fireEvent.click(screen.getByRole("button", { name: "Search" }));
    await waitFor(() => expect(screen.getByTestId("logs-empty").textContent).toMatch(/No entry matches these filters/));
    expect(logReads().at(-1)!.query.get("q")).toBe("relation");
  });

  it("a first read that failed: the API's words, and a way to read again", async () => {
    const { Logs } = await import("../src/pages/insights.tsx");
    let fail = true;
    respond = () =>
      fail
        ? {
            status: 503,
            body: {
              error: { code: "unavailable", message: "The database's host does not answer", details: [] },
              meta: { request_id: "r" },
            },
          }
        : ok({ entries: [entry("a")], next_cursor: "n1", prev_cursor: null });
    render(h(Logs, { db: { id: "db-1" } }));
    await waitFor(() => expect(screen.getByRole("alert").textContent).toContain("The database's host does not answer"));
    fail = false;
    fireEvent.click(screen.getByRole("button", { name: "Try again" }));
    await waitFor(() => expect(messages()).toEqual(["a"]));
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("follows what is new from next_cursor, on top, and stops reading once the tab is closed", async () => {
    const { Logs } = await import("../src/pages/insights.tsx");
    respond = (_m, _p, q) => {
      const cursor = q.get("cursor");
      if (cursor === "n1") return ok({ entries: [entry("c"), entry("d", "WARNING")], next_cursor: "n2", prev_cursor: "p2" });
      if (cursor === "n2") return ok({ entries: [], next_cursor: "n2", prev_cursor: "p3" });
      return ok({ entries: [entry("a"), entry("b")], next_cursor: "n1", prev_cursor: null });
    };
    const { unmount } = render(h(Logs, { db: { id: "db-1" } }));
    await waitFor(() => expect(messages()).toEqual(["b", "a"]));
    expect(screen.getByTestId("log-beginning")).toBeTruthy();
    fireEvent.click(screen.getByLabelText(/Follow new entries/));
    await waitFor(() => expect(messages()).toEqual(["d", "c", "b", "a"]));
    expect(screen.getByTestId("log-follow-status").textContent).toMatch(/^Following/);
    await waitFor(() => expect(logReads().some((r) => r.query.get("cursor") === "n2")).toBe(true), { timeout: FOLLOW_MS * 3 });
    expect(messages()).toEqual(["d", "c", "b", "a"]);
    unmount();
    const after = logReads().length;
    await new Promise((r) => setTimeout(r, FOLLOW_MS + 1000));
    expect(logReads().length).toBe(after);
  });
});

const stat = (query: string, calls: number, total: number) => ({
  query_id: String(calls),
  query,
  calls,
  total_time_ms: total,
  mean_time_ms: total / calls,
  min_time_ms: 0.1,
  max_time_ms: total,
  rows: calls,
  cache_hit_ratio: 1,
  user: "dbadmin",
  database: "defaultdb",
});

describe("the queries tab", () => {
  it("ordered as asked; reset only after a confirmation, then read again", async () => {
    const { Queries } = await import("../src/pages/insights.tsx");
    let reset = false;
    respond = (method, path, q) => {
      if (method === "POST" && path.endsWith("/queries/reset")) {
        reset = true;
        return { status: 204 };
      }
      if (reset) return ok({ queries: [], stats_reset: "2026-11-28T11:00:00Z" });
      const rows = [stat("SELECT $1", 7, 2), stat("UPDATE t SET a = $1", 2, 40)];
      return ok({ queries: q.get("order_by") === "calls" ? rows : rows.reverse(), stats_reset: "2026-11-28T09:00:00Z" });
    };
    render(h(Queries, { db: { id: "db-1", status: "running" } }));
    const firstQuery = () => document.querySelector("tbody tr td.sql")?.textContent;
    await waitFor(() => expect(firstQuery()).toBe("UPDATE t SET a = $1"));
    expect(seen[0]!.query.get("order_by")).toBe("total_time");
    expect(document.querySelector("th[aria-sort=descending]")?.textContent).toMatch(/^Total time/);

    fireEvent.click(screen.getByRole("button", { name: /^Calls/ }));
    await waitFor(() => expect(firstQuery()).toBe("SELECT $1"));
    expect(seen.at(-1)!.query.get("order_by")).toBe("calls");
    expect(document.querySelector("tbody tr [data-column=calls]")?.textContent).toBe("7");
    expect(document.querySelector("th[aria-sort=descending]")?.textContent).toMatch(/^Calls/);

    fireEvent.click(screen.getByRole("button", { name: "Reset statistics" }));
    expect(seen.some((s) => s.method === "POST")).toBe(false);
    fireEvent.click(screen.getByRole("button", { name: "Keep them" }));
    expect(screen.queryByRole("button", { name: "Reset query statistics" })).toBeNull();
    fireEvent.click(screen.getByRole("button", { name: "Reset statistics" }));
    fireEvent.click(screen.getByRole("button", { name: "Reset query statistics" }));
    await waitFor(() => expect(screen.getByTestId("queries-empty")).toBeTruthy());
    expect(seen.filter((s) => s.method === "POST").map((s) => s.path)).toEqual(["/v1/databases/db-1/queries/reset"]);
  });

  it("for a viewer: read, the reset disabled; the API's 409 (no pg_stat_statements) as it words it", async () => {
    const { Queries } = await import("../src/pages/insights.tsx");
    const { ReadOnly } = await import("../src/access.ts");
    const words =
      "query statistics need pg_stat_statements in shared_preload_libraries (the default): set it back through the configuration and restart the database";
    respond = () => ({
      status: 409,
      body: { error: { code: "resource_conflict", message: words, details: [] }, meta: { request_id: "r" } },
    });
    render(h(ReadOnly.Provider, { value: true }, h(Queries, { db: { id: "db-1", status: "running" } })));
    await waitFor(() => expect(screen.getByTestId("queries-unavailable").textContent).toBe(words));
    expect(screen.getByRole("link", { name: "Open the configuration" }).getAttribute("href")).toBe("/databases/db-1/configuration");
    expect((screen.getByRole("button", { name: "Reset statistics" }) as HTMLButtonElement).disabled).toBe(true);
  });

  it("while stopped: says the server must be running, and reads nothing", async () => {
    const { Queries } = await import("../src/pages/insights.tsx");
    render(h(Queries, { db: { id: "db-1", status: "stopped" } }));
    expect(screen.getByText(/The database is stopped: query statistics are read from its server/)).toBeTruthy();
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual([]);
  });
});
