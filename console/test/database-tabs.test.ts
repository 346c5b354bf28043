// @vitest-environment happy-dom
/**
 * The database tabs for high availability, configuration, roles and extensions: their logic
 * (src/config.ts, src/ha.ts) and their forms with the real client (sdks/node) over real HTTP to a local
 * server answering with the API's envelopes by route (browser-database.test.ts runs the same tabs
 * against the real stack).
 */
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/preact";
import { h } from "preact";
import { afterEach, describe, expect, it } from "vitest";
import { boundsText, changesOf, type Parameter, pendingRestart, shown, textOf, valueFromText } from "../src/config.ts";
import { failoverBlocked, failoverProgress, haSettling } from "../src/ha.ts";
import { ok, problem, scriptedApi } from "./support/scripted-api.ts";

const { seen, answer, routes } = scriptedApi("/databases/db-1");

afterEach(() => {
  cleanup();
});

/** Preact renders a state change on the next tick: the submit handler then sees it. */
const settle = () => new Promise((r) => setTimeout(r, 0));

const param = (p: Partial<Parameter> & Pick<Parameter, "name" | "type" | "value">): Parameter => ({
  default: p.value,
  unit: null,
  min: null,
  max: null,
  allowed: null,
  requires_restart: false,
  pending_restart: false,
  overridden: false,
  description: `${p.name}.`,
  ...p,
});

const workMem = param({ name: "work_mem", type: "integer", unit: "kB", value: 4096, min: 64, max: 262144 });
const timeout = param({ name: "statement_timeout", type: "integer", unit: "ms", value: 0, min: 0, max: 2147483647 });
const jit = param({ name: "jit", type: "bool", value: true });
const maxConnections = param({ name: "max_connections", type: "integer", value: 50, min: 10, max: 50, requires_restart: true });
const preload = param({
  name: "shared_preload_libraries",
  type: "list",
  value: ["pg_stat_statements"],
  allowed: ["pg_stat_statements", "auto_explain"],
  requires_restart: true,
});
const isolation = param({
  name: "default_transaction_isolation",
  type: "enum",
  value: "read committed",
  allowed: ["serializable", "repeatable read", "read committed"],
  overridden: true,
  default: "read committed",
});

describe("the configuration's logic", () => {
  it("shows values as text and reads them back: numbers as numbers, units as typed, booleans, lists", () => {
    expect([textOf(4096), textOf(true), textOf(["a", "b"]), textOf("UTC")]).toEqual(["4096", "on", "a,b", "UTC"]);
    expect(valueFromText(workMem, " 8192 ")).toBe(8192);
    expect(valueFromText(workMem, "64MB")).toBe("64MB");
    expect(valueFromText(workMem, "")).toBe("");
    expect(valueFromText(jit, "off")).toBe(false);
    expect(valueFromText(preload, "pg_stat_statements, auto_explain")).toEqual(["pg_stat_statements", "auto_explain"]);
    expect(valueFromText(preload, "")).toEqual([]);
  });

  it("sends only what differs from the value in effect, and null for an override put back to its default", () => {
    const all = [workMem, timeout, jit, preload, isolation];
    expect(changesOf(all, {})).toEqual({});
    expect(
      changesOf(all, {
        work_mem: { text: "64MB" },
        statement_timeout: { text: "0" },
        jit: { text: "off" },
        shared_preload_libraries: { text: "pg_stat_statements" },
        default_transaction_isolation: "default",
      }),
    ).toEqual({ work_mem: "64MB", jit: false, default_transaction_isolation: null });
    // A list compares as a set; a default asked for a parameter not overridden sends nothing.
    expect(changesOf([preload, workMem], { shared_preload_libraries: { text: "pg_stat_statements" }, work_mem: "default" })).toEqual({});
  });

  it("words values, bounds and what waits for a restart", () => {
    expect(shown(workMem, 4096)).toBe("4096 kB");
    expect(shown(preload, [])).toBe("(none)");
    expect(shown(jit, false)).toBe("off");
    expect(boundsText(workMem)).toBe("64 … 262144 kB");
    expect(boundsText({ min: 0, max: null, unit: "ms" })).toBe("≥ 0 ms");
    expect(boundsText(jit)).toBe("");
    expect(pendingRestart([workMem, { ...maxConnections, pending_restart: true }])).toEqual(["max_connections"]);
  });
});

const member = (id: string, role: "primary" | "standby", status = "running", lag = 0) => ({
  id,
  role,
  status,
  region: "fsn1",
  lag_bytes: lag,
});

describe("high availability's logic", () => {
  it("reads quickly while members come up, and says why a switchover cannot be asked for", () => {
    const none = { standbys: 0, synchronous: false, members: [member("node-a", "primary")], last_failover: null };
    const seeding = {
      standbys: 1,
      synchronous: true,
      members: [member("node-a", "primary"), member("node-b", "standby", "provisioning")],
      last_failover: null,
    };
    const ready = { ...seeding, members: [member("node-a", "primary"), member("node-b", "standby")] };
    expect([haSettling(none as never), haSettling(seeding as never), haSettling(ready as never)]).toEqual([false, true, false]);
    expect(haSettling({ ...ready, standbys: 2 } as never)).toBe(true);
    expect(failoverBlocked(none as never, "running")).toMatch(/needs a standby/);
    expect(failoverBlocked(seeding as never, "running")).toBe("No standby is running yet.");
    expect(failoverBlocked(ready as never, "stopped")).toMatch(/is stopped/);
    expect(failoverBlocked(ready as never, "running")).toBeUndefined();
  });

  it("words a switchover's operation while it runs, once done, and when it failed", () => {
    const op = {
      id: "op-1",
      type: "failover",
      started_at: "2026-11-28T08:00:00Z",
      finished_at: null,
      error: null,
      from: "node-a",
      to: "node-b",
    };
    expect(failoverProgress({ ...op, status: "running" } as never)).toMatchObject({
      state: "running",
      text: /^Switching over from node-a to node-b/,
    });
    expect(failoverProgress({ ...op, status: "succeeded" } as never).text).toBe(
      "Switched over from node-a to node-b. The connection string is unchanged.",
    );
    expect(failoverProgress({ ...op, status: "failed", error: "the standby did not catch up in 30 s" } as never)).toEqual({
      state: "failed",
      text: "The switchover from node-a to node-b did not happen: the standby did not catch up in 30 s.",
    });
  });
});

describe("the configuration form", () => {
  it("saves several parameters at once and shows each 422 beside its field; a pending restart offers one", async () => {
    const { Configuration } = await import("../src/pages/configuration.tsx");
    answer("GET /v1/databases/db-1/config", 200, ok({ parameters: [workMem, timeout, maxConnections] }));
    answer(
      "PATCH /v1/databases/db-1/config",
      422,
      problem("validation_error", "The request is invalid", [
        { field: "body.parameters.work_mem", message: "must be between 64 and 262144 kB on the micro tier" },
        { field: "body.parameters.statement_timeout", message: "must be a number (ms, or with a unit: 30s, 5min)" },
      ]),
    );
    render(h(Configuration, { db: { id: "db-1", status: "running" }, onChange: () => {} }));
    await waitFor(() => expect(screen.getByLabelText(/^work_mem/)).toBeTruthy());
    const save = () => screen.getByRole("button", { name: /^Save/ }) as HTMLButtonElement;
    expect(save().disabled).toBe(true);
    fireEvent.input(screen.getByLabelText(/^work_mem/), { target: { value: "999GB" } });
    fireEvent.input(screen.getByLabelText(/^statement_timeout/), { target: { value: "soon" } });
    expect(save().textContent).toBe("Save 2 changes");
    fireEvent.click(save());
    await waitFor(() => expect(document.getElementById("param-work_mem-error")?.textContent).toMatch(/between 64 and 262144 kB/));
    expect(document.getElementById("param-statement_timeout-error")?.textContent).toMatch(/must be a number/);
    expect(screen.getByLabelText(/^work_mem/).getAttribute("aria-invalid")).toBe("true");
    expect(screen.getByLabelText(/^max_connections/).getAttribute("aria-invalid")).toBeNull();
    expect(seen.at(-1)).toMatchObject({ method: "PATCH", body: { parameters: { work_mem: "999GB", statement_timeout: "soon" } } });

    routes.delete("PATCH /v1/databases/db-1/config");
    answer(
      "PATCH /v1/databases/db-1/config",
      200,
      ok({
        parameters: [
          { ...workMem, value: 65536, overridden: true },
          { ...timeout, value: 30000, overridden: true },
          { ...maxConnections, value: 45, overridden: true, pending_restart: true },
        ],
      }),
    );
    fireEvent.input(screen.getByLabelText(/^work_mem/), { target: { value: "64MB" } });
    fireEvent.input(screen.getByLabelText(/^statement_timeout/), { target: { value: "30s" } });
    fireEvent.input(screen.getByLabelText(/^max_connections/), { target: { value: "45" } });
    fireEvent.click(save());
    await waitFor(() => expect(screen.getByTestId("pending-restart").textContent).toContain("Restart to apply: max_connections"));
    expect(seen.at(-1)!.body).toEqual({ parameters: { work_mem: "64MB", statement_timeout: "30s", max_connections: 45 } });
    expect((screen.getByLabelText(/^work_mem/) as HTMLInputElement).value).toBe("65536");
    expect(document.querySelector(".field-error")).toBeNull();
    expect(save().textContent).toBe("Save changes");

    // The restart: read again at once (still pending), then every 3 s until applied. The banner stays until a read
    // says so — the read from before the save (no pending restart) is never shown again meanwhile.
    answer("POST /v1/databases/db-1/restart", 202, ok({ id: "db-1", status: "restarting" }));
    routes.delete("GET /v1/databases/db-1/config");
    const after = (pending: boolean) => [
      { ...workMem, value: 65536, overridden: true },
      { ...timeout, value: 30000, overridden: true },
      { ...maxConnections, value: 45, overridden: true, pending_restart: pending },
    ];
    answer("GET /v1/databases/db-1/config", 200, ok({ parameters: after(true) }));
    answer("GET /v1/databases/db-1/config", 200, ok({ parameters: after(false) }));
    const shownStates: boolean[] = [true];
    const watch = new MutationObserver(() => {
      const now = document.querySelector("[data-testid=pending-restart]") !== null;
      if (shownStates.at(-1) !== now) shownStates.push(now);
    });
    watch.observe(document.body, { childList: true, subtree: true });
    try {
      fireEvent.click(screen.getByRole("button", { name: "Restart the database now" }));
      await waitFor(() => expect(seen.some((s) => s.method === "POST" && s.path === "/v1/databases/db-1/restart")).toBe(true));
      const reads = () => seen.filter((s) => s.method === "GET" && s.path === "/v1/databases/db-1/config").length;
      await waitFor(() => expect(reads() >= 3 && screen.queryByTestId("pending-restart") === null).toBe(true), { timeout: 15_000 });
    } finally {
      watch.disconnect();
    }
    expect(shownStates).toEqual([true, false]);
    expect(document.querySelector(".status-pending")).toBeNull();
  });

  it("for a viewer: the fields and the save button disabled", async () => {
    const { Configuration } = await import("../src/pages/configuration.tsx");
    const { ReadOnly } = await import("../src/access.ts");
    answer("GET /v1/databases/db-1/config", 200, ok({ parameters: [workMem, { ...maxConnections, pending_restart: true }] }));
    render(h(ReadOnly.Provider, { value: true }, h(Configuration, { db: { id: "db-1", status: "running" }, onChange: () => {} })));
    await waitFor(() => expect(screen.getByLabelText(/^work_mem/)).toBeTruthy());
    // Inside a disabled fieldset: the browser disables the field (browser-database.test.ts checks it in Chromium).
    expect((screen.getByLabelText(/^work_mem/).closest("fieldset") as HTMLFieldSetElement).disabled).toBe(true);
    expect((screen.getByRole("button", { name: /^Save/ }) as HTMLButtonElement).disabled).toBe(true);
    expect((screen.getByRole("button", { name: "Restart the database now" }) as HTMLButtonElement).disabled).toBe(true);
  });
});

describe("the high availability tab", () => {
  const record = (standbys: number, members: ReturnType<typeof member>[], synchronous = false) =>
    ok({ standbys, synchronous, members, last_failover: null });

  it("shows the API's 422 beside the field it names, and its 409 as it words it", async () => {
    const { HighAvailabilityTab } = await import("../src/pages/high-availability.tsx");
    answer("GET /v1/databases/db-1/high-availability", 200, record(0, [member("node-a", "primary")]));
    answer(
      "PUT /v1/databases/db-1/high-availability",
      422,
      problem("validation_error", "The request is invalid", [{ field: "synchronous", message: "needs at least 1 standby" }]),
    );
    const words =
      "region fsn1 has 1 host besides the primary's that can take a standby now (live, with PostgreSQL 17, capacity left and port 15400 free); 2 standbys need 2 hosts, each apart from the primary and from each other";
    answer("PUT /v1/databases/db-1/high-availability", 409, problem("conflict", words));
    render(h(HighAvailabilityTab, { db: { id: "db-1", status: "running" } }));
    await waitFor(() => expect(screen.getByLabelText("Standbys")).toBeTruthy());
    expect((screen.getByRole("button", { name: "Fail over" }) as HTMLButtonElement).disabled).toBe(true);
    // (happy-dom with preact/compat does not deliver a <select>'s change event to Preact: the standbys' choice is
    // exercised in Chromium by browser-database.test.ts.)
    fireEvent.click(screen.getByLabelText(/^Synchronous/));
    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Save high availability" }));
    await waitFor(() => expect(document.getElementById("ha-synchronous-error")?.textContent).toBe("needs at least 1 standby"));
    expect(screen.getByLabelText(/^Synchronous/).getAttribute("aria-invalid")).toBe("true");
    expect(seen.at(-1)).toMatchObject({ method: "PUT", body: { standbys: 0, synchronous: true } });

    fireEvent.click(screen.getByRole("button", { name: "Save high availability" }));
    await waitFor(() => expect(screen.getByRole("alert").textContent).toContain(words));
    expect(document.getElementById("ha-synchronous-error")).toBeNull();
  });

  it("asks for a switchover once confirmed and follows its operation until it succeeded", async () => {
    const { HighAvailabilityTab } = await import("../src/pages/high-availability.tsx");
    answer(
      "GET /v1/databases/db-1/high-availability",
      200,
      record(1, [member("node-a", "primary"), member("node-b", "standby", "running", 8192)], true),
    );
    const op = {
      id: "op-9",
      type: "failover",
      started_at: "2026-11-28T08:00:00Z",
      finished_at: null,
      error: null,
      from: "node-a",
      to: "node-b",
    };
    answer("POST /v1/databases/db-1/failover", 202, ok({ ...op, status: "running" }));
    const list = (status: string) => ({
      data: { operations: [{ ...op, status }] },
      meta: { request_id: "r", page: 1, per_page: 20, total: 1, total_pages: 1 },
    });
    answer("GET /v1/databases/db-1/operations", 200, list("running"));
    answer("GET /v1/databases/db-1/operations", 200, list("succeeded"));
    render(h(HighAvailabilityTab, { db: { id: "db-1", status: "running" } }));
    await waitFor(() => expect(screen.getByText("8.0 KB")).toBeTruthy());
    fireEvent.click(screen.getByRole("button", { name: "Fail over" }));
    expect(seen.some((s) => s.path.endsWith("/failover"))).toBe(false);
    fireEvent.click(screen.getByRole("button", { name: "Confirm the switchover" }));
    await waitFor(() =>
      expect(screen.getByTestId("failover-progress").textContent).toMatch(/^running Switching over from node-a to node-b/),
    );
    // One at a time: the button waits for this one to settle.
    expect((screen.getByRole("button", { name: "Fail over" }) as HTMLButtonElement).disabled).toBe(true);
    await waitFor(() => expect(screen.getByTestId("failover-progress").textContent).toMatch(/^succeeded Switched over/), {
      timeout: 10_000,
    });
    await waitFor(() => expect((screen.getByRole("button", { name: "Fail over" }) as HTMLButtonElement).disabled).toBe(false));
  });
});

describe("the operations list", () => {
  it("shows a standby replacement's members and reason under its type, and one still waiting for a host", async () => {
    const { Operations } = await import("../src/pages/database.tsx");
    const base = { started_at: "2026-11-28T08:00:00Z", finished_at: "2026-11-28T08:00:01Z", error: null, status: "succeeded" };
    answer("GET /v1/databases/db-1/operations", 200, {
      data: {
        operations: [
          {
            ...base,
            id: "op-2",
            type: "standby_replaced",
            from: "node-old",
            to: "node-new",
            reason: "the standby's host agent-b was not heard from since 08:00:00; its replacement went to agent-c",
          },
          { ...base, id: "op-1", type: "standby_replaced", from: "node-lost", reason: "no other host can take a standby yet" },
          { ...base, id: "op-0", type: "resize" },
        ],
      },
      meta: { request_id: "r", page: 1, per_page: 50, total: 3, total_pages: 1 },
    });
    render(h(Operations, { id: "db-1" }));
    await waitFor(() => expect(screen.getByText("node-old → node-new")).toBeTruthy());
    expect(screen.getByText(/agent-b was not heard from/)).toBeTruthy();
    expect(screen.getByText("node-lost → (waiting for a host)")).toBeTruthy();
    const rows = [...document.querySelectorAll("tbody tr")].map((r) => r.querySelector("td")!.textContent);
    expect(rows).toEqual([
      "standby_replacednode-old → node-newthe standby's host agent-b was not heard from since 08:00:00; its replacement went to agent-c",
      "standby_replacednode-lost → (waiting for a host)no other host can take a standby yet",
      "resize",
    ]);
  });
});
