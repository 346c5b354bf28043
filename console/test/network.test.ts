// @vitest-environment happy-dom
/**
 * The database's Network tab: the formatting of trusted sources and the
 * pooler, and its forms with their real client (sdks/node) over real HTTP to
 * a local server answering with the API's envelopes by route (the browser test
 * in browser.test.ts runs the same tab against the real stack).
 */
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/preact";
import { h } from "preact";
import { afterEach, describe, expect, it } from "vitest";
import { describeCidr, expiresAtFromInput, poolerState, poolSizeFromInput, removalNote } from "../src/network.ts";
import { list, ok, problem, scriptedApi } from "./support/scripted-api.ts";

const { seen, answer, routes } = scriptedApi("/databases/db-1/network");
const page = (items: unknown[]) => list("trusted_sources", items);

afterEach(() => {
  cleanup();
});

const office = { id: "ts-1", cidr: "203.0.113.0/24", description: "office", expires_at: null, created_at: "2026-01-05T10:00:00Z" };
const ci = { id: "ts-2", cidr: "198.51.100.7/32", description: "", expires_at: "2026-01-06T12:30:00Z", created_at: "2026-01-05T11:00:00Z" };
const pooler = {
  enabled: true,
  mode: "transaction",
  pool_size: 20,
  max_client_connections: 1000,
  host: "db-1-pooler.db.example.com",
  port: 16400,
  connection_string: "postgresql://dbadmin:********@db-1-pooler.db.example.com:16400/defaultdb?sslmode=require",
};

describe("formatting of trusted sources and the pooler", () => {
  it("says what a CIDR admits: one address, or a network and its size", () => {
    expect(describeCidr("198.51.100.7/32")).toBe("one IPv4 address");
    expect(describeCidr("203.0.113.0/24")).toBe("IPv4 network, 256 addresses");
    expect(describeCidr("10.0.0.0/8")).toBe("IPv4 network, 16,777,216 addresses");
    expect(describeCidr("0.0.0.0/0")).toBe("every IPv4 address");
    expect(describeCidr("2001:db8::1/128")).toBe("one IPv6 address");
    expect(describeCidr("2001:db8::/32")).toBe("IPv6 network (/32)");
    expect(describeCidr("garbage/99")).toBe("garbage/99");
  });

  it("sends the expiry picked in the user's time zone in UTC, none when left empty", () => {
    expect(expiresAtFromInput("")).toBeUndefined();
    expect(expiresAtFromInput("2026-01-06T12:30:00")).toBe(new Date(2026, 0, 6, 12, 30, 0).toISOString());
    expect(expiresAtFromInput("not a date")).toBe("not a date");
  });

  it("warns that removing the last entry admits every address again", () => {
    expect(removalNote([office, ci], "ts-2")).toBe(
      "198.51.100.7/32 stops being admitted within 5 seconds, unless another entry covers it.",
    );
    expect(removalNote([office], "ts-1")).toMatch(
      /only trusted source: once it is removed the list is empty and every address can connect/,
    );
  });

  it("shows the pooler enabled, disabled, or unavailable with the API's reason", () => {
    expect(poolerState(pooler as any)).toBe("enabled");
    expect(poolerState({ ...pooler, enabled: false } as any)).toBe("disabled");
    expect(poolerState({ enabled: false, mode: "transaction", pool_size: 20, max_client_connections: 1000, reason: "no pgbouncer" })).toBe(
      "unavailable",
    );
    expect(poolSizeFromInput(" 12 ")).toBe(12);
    expect(poolSizeFromInput("")).toBeUndefined();
  });
});

describe("the trusted sources section", () => {
  it("says an empty list admits every address; a 422 is shown beside the address field; an entry added is listed", async () => {
    const { TrustedSources } = await import("../src/pages/network.tsx");
    answer("GET /v1/databases/db-1/trusted-sources", 200, page([]));
    render(h(TrustedSources, { id: "db-1" }));
    await waitFor(() => expect(screen.getByTestId("trusted-empty").textContent).toMatch(/every address can connect/));

    answer(
      "POST /v1/databases/db-1/trusted-sources",
      422,
      problem("validation_error", "The request is invalid", [{ field: "cidr", message: "host bits set: did you mean 10.0.0.0/8?" }]),
    );
    fireEvent.input(screen.getByLabelText("Address or network (CIDR)"), { target: { value: "10.1.2.3/8" } });
    fireEvent.click(screen.getByRole("button", { name: "Add trusted source" }));
    await waitFor(() => expect(document.getElementById("ts-cidr-error")?.textContent).toBe("host bits set: did you mean 10.0.0.0/8?"));
    expect(screen.getByLabelText("Address or network (CIDR)").getAttribute("aria-invalid")).toBe("true");
    expect(seen.at(-1)).toMatchObject({ method: "POST", body: { cidr: "10.1.2.3/8" } });

    routes.clear();
    answer("POST /v1/databases/db-1/trusted-sources", 201, ok(ci));
    answer("GET /v1/databases/db-1/trusted-sources", 200, page([ci]));
    fireEvent.input(screen.getByLabelText("Address or network (CIDR)"), { target: { value: " 198.51.100.7 " } });
    fireEvent.input(screen.getByLabelText("Expires (your time zone, optional)"), { target: { value: "2026-01-06T12:30:00" } });
    fireEvent.click(screen.getByRole("button", { name: "Add trusted source" }));
    await waitFor(() => expect(screen.getByText("198.51.100.7/32")).toBeTruthy());
    expect(seen.find((s) => s.method === "POST" && s.body.cidr === "198.51.100.7")!.body).toEqual({
      cidr: "198.51.100.7",
      expires_at: new Date(2026, 0, 6, 12, 30, 0).toISOString(),
    });
    // The expiry in the user's time zone, UTC on hover.
    expect(document.querySelector("time")!.getAttribute("title")).toBe("2026-01-06 12:30:00 UTC");
    expect(screen.getByText("one IPv4 address")).toBeTruthy();
    expect(document.getElementById("ts-cidr-error")).toBeNull();
  });

  it("removes an entry only once confirmed", async () => {
    const { TrustedSources } = await import("../src/pages/network.tsx");
    answer("GET /v1/databases/db-1/trusted-sources", 200, page([office]));
    render(h(TrustedSources, { id: "db-1" }));
    await waitFor(() => screen.getByRole("button", { name: "Remove 203.0.113.0/24" }));
    fireEvent.click(screen.getByRole("button", { name: "Remove 203.0.113.0/24" }));
    expect(screen.getByText(/only trusted source/)).toBeTruthy();
    expect(seen.filter((s) => s.method === "DELETE")).toEqual([]);
    fireEvent.click(screen.getByRole("button", { name: "Keep it" }));
    expect(seen.filter((s) => s.method === "DELETE")).toEqual([]);

    routes.clear();
    answer("DELETE /v1/databases/db-1/trusted-sources/ts-1", 204);
    answer("GET /v1/databases/db-1/trusted-sources", 200, page([]));
    fireEvent.click(screen.getByRole("button", { name: "Remove 203.0.113.0/24" }));
    fireEvent.click(screen.getByRole("button", { name: "Confirm removing 203.0.113.0/24" }));
    await waitFor(() => screen.getByTestId("trusted-empty"));
    expect(seen.filter((s) => s.method === "DELETE").map((s) => s.path)).toEqual(["/v1/databases/db-1/trusted-sources/ts-1"]);
  });
});

describe("the pooler section", () => {
  it("shows its host and connection string; toggles it; a pool size beyond the tier is a 422 beside the field", async () => {
    const { PoolerSection } = await import("../src/pages/network.tsx");
    answer("GET /v1/databases/db-1/pooler", 200, ok(pooler));
    render(h(PoolerSection, { id: "db-1" }));
    await waitFor(() => screen.getByText(pooler.connection_string));
    expect(screen.getByText("db-1-pooler.db.example.com")).toBeTruthy();
    expect(document.querySelector(".status")!.textContent).toBe("enabled");

    answer("PATCH /v1/databases/db-1/pooler", 200, ok({ ...pooler, enabled: false }));
    fireEvent.click(screen.getByRole("button", { name: "Disable the pooler" }));
    await waitFor(() => screen.getByRole("button", { name: "Enable the pooler" }));
    expect(document.querySelector(".status")!.textContent).toBe("disabled");
    expect(seen.at(-1)).toMatchObject({ method: "PATCH", body: { enabled: false } });

    routes.clear();
    answer(
      "PATCH /v1/databases/db-1/pooler",
      422,
      problem("validation_error", "The request is invalid", [
        { field: "pool_size", message: "must be between 1 and 20 (the micro tier's max_connections less 5)" },
      ]),
    );
    fireEvent.input(screen.getByLabelText("Pool size (server connections)"), { target: { value: "500" } });
    fireEvent.click(screen.getByRole("button", { name: "Save pooler settings" }));
    await waitFor(() => expect(document.getElementById("pooler-size-error")?.textContent).toMatch(/between 1 and 20/));
    expect(seen.at(-1)).toMatchObject({ method: "PATCH", body: { mode: "transaction", pool_size: 500 } });

    routes.clear();
    answer("PATCH /v1/databases/db-1/pooler", 200, ok({ ...pooler, enabled: false, mode: "session", pool_size: 10 }));
    fireEvent.input(screen.getByLabelText("Pool size (server connections)"), { target: { value: "10" } });
    fireEvent.change(screen.getByLabelText("Pool mode"), { target: { value: "session" } });
    fireEvent.click(screen.getByRole("button", { name: "Save pooler settings" }));
    await waitFor(() => expect(screen.getByTestId("pooler-applied").textContent).toBe("In effect: session mode, pool size 10."));
    expect(document.getElementById("pooler-size-error")).toBeNull();
  });

  it("says why there is no pooler where the host runs no PgBouncer", async () => {
    const { PoolerSection } = await import("../src/pages/network.tsx");
    answer(
      "GET /v1/databases/db-1/pooler",
      200,
      ok({
        enabled: false,
        mode: "transaction",
        pool_size: 20,
        max_client_connections: 1000,
        reason: "no connection pooler on this database's host: /usr/sbin/pgbouncer is not runnable",
      }),
    );
    render(h(PoolerSection, { id: "db-1" }));
    await waitFor(() => expect(screen.getByTestId("pooler-reason").textContent).toMatch(/pgbouncer is not runnable/));
    expect(screen.queryByRole("button", { name: /the pooler/ })).toBeNull();
    expect(screen.getByText(/works without one/)).toBeTruthy();
  });
});
