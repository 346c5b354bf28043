// @vitest-environment happy-dom
/**
 * The console's forms with their real client (sdks/node) over real HTTP, to a
 * local server that answers with the API's envelopes as the test queues them
 * (the browser test in browser.test.ts runs the same forms against the real stack).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/preact";
import { h } from "preact";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

interface Seen {
  method: string;
  path: string;
  body: any;
  authorization: string | undefined;
}

let server: Server;
const seen: Seen[] = [];
const answers: Array<{ status: number; body: unknown }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      seen.push({ method: req.method!, path: req.url!, body: raw ? JSON.parse(raw) : undefined, authorization: req.headers.authorization });
      const answer = answers.shift() ?? {
        status: 500,
        body: { error: { code: "internal_error", message: "nothing queued", details: [] }, meta: { request_id: "r" } },
      };
      res.writeHead(answer.status, {
        "content-type": "application/json",
        "access-control-allow-origin": "*",
        "access-control-allow-headers": "*",
      });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  // The console's client talks to its own origin: this server's.
  (window as any).happyDOM.setURL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/login`);
});

afterEach(() => {
  cleanup();
  seen.length = 0;
  answers.length = 0;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const error = (status: number, code: string, message: string, details: Array<{ field: string; message: string }> = []) => ({
  status,
  body: { error: { code, message, details }, meta: { request_id: "req_1" } },
});

describe("the login form", () => {
  it("shows the API's details beside the field they name, and marks that field invalid", async () => {
    const { Login } = await import("../src/pages/auth.tsx");
    answers.push(error(400, "validation_error", "The request is invalid", [{ field: "email", message: "must be an e-mail address" }]));
    render(h(Login, {}));
    fireEvent.input(screen.getByLabelText("E-mail"), { target: { value: "not-an-address" } });
    fireEvent.input(screen.getByLabelText("Password"), { target: { value: "pw" } });
    fireEvent.click(screen.getByRole("button", { name: "Log in" }));
    await waitFor(() => expect(document.getElementById("email-error")?.textContent).toBe("must be an e-mail address"));
    expect(screen.getByLabelText("E-mail").getAttribute("aria-invalid")).toBe("true");
    expect(screen.getByLabelText("E-mail").getAttribute("aria-describedby")).toBe("email-error");
    expect(screen.getByLabelText("Password").getAttribute("aria-invalid")).toBeNull();
    expect(seen[0]).toMatchObject({ method: "POST", path: "/v1/auth/token", body: { email: "not-an-address", password: "pw" } });
  });

  it("signs in: the token goes to sessionStorage and the client, never to localStorage or the address", async () => {
    const { Login } = await import("../src/pages/auth.tsx");
    const { client } = await import("../src/session.ts");
    answers.push({
      status: 200,
      body: {
        data: { access_token: "dbs_secret_token", token_type: "Bearer", expires_at: "2026-12-01T00:00:00Z" },
        meta: { request_id: "r" },
      },
    });
    answers.push({
      status: 200,
      body: { data: { id: "org-1", name: "Acme", plan: "free", created_at: "2026-11-01T00:00:00Z" }, meta: { request_id: "r" } },
    });
    render(h(Login, {}));
    fireEvent.input(screen.getByLabelText("E-mail"), { target: { value: "ada@example.com" } });
    fireEvent.input(screen.getByLabelText("Password"), { target: { value: "right" } });
    fireEvent.click(screen.getByRole("button", { name: "Log in" }));
    await waitFor(() => expect(location.pathname).toBe("/databases"));
    expect(sessionStorage.getItem("dbaas.session")).toContain("dbs_secret_token");
    expect(JSON.stringify({ ...localStorage })).not.toContain("dbs_secret_token");
    expect(location.href).not.toContain("dbs_secret_token");
    await client.organization.get();
    expect(seen.at(-1)!.authorization).toBe("Bearer dbs_secret_token");
  });
});

const catalogue = {
  regions: [{ code: "fsn1" as const, name: "Falkenstein" }],
  tiers: [
    { name: "micro" as const, vcpu: 1, memory_gb: 1, storage_gb: 10, hourly_price: 0.01 },
    { name: "small" as const, vcpu: 2, memory_gb: 4, storage_gb: 50, hourly_price: 0.05 },
  ],
  versions: [
    { version: "16", default: false },
    { version: "17", default: true },
  ],
};

describe("the create-database form", () => {
  it("shows each tier with its price per hour and per month", async () => {
    const { CreateDatabase } = await import("../src/pages/databases.tsx");
    render(h(CreateDatabase, { catalogue, onCreated: () => {}, onCancel: () => {} }));
    expect(screen.getByLabelText(/^small — 2 vCPU, 4 GB RAM, 50 GB · \$0\.050\/h \(≈ \$36\.50\/month\)$/)).toBeTruthy();
    expect((screen.getByLabelText("PostgreSQL version") as HTMLSelectElement).value).toBe("17");
  });

  it("sends what was chosen; a 402 leads to adding a card; the new database (with its password) is handed on", async () => {
    const { CreateDatabase } = await import("../src/pages/databases.tsx");
    const created: unknown[] = [];
    answers.push(error(402, "payment_required", "A payment method is required for this tier"));
    render(h(CreateDatabase, { catalogue, onCreated: (db: unknown) => created.push(db), onCancel: () => {} }));
    fireEvent.input(screen.getByLabelText("Name"), { target: { value: "analytics" } });
    fireEvent.click(screen.getByLabelText(/^small/));
    fireEvent.click(screen.getByRole("button", { name: "Create database" }));
    await waitFor(() => expect(screen.getByRole("link", { name: "Add a card on the billing page" })).toBeTruthy());
    expect(screen.getByRole("link", { name: "Add a card on the billing page" }).getAttribute("href")).toBe("/billing#payment-methods");
    expect(seen[0]).toMatchObject({
      method: "POST",
      path: "/v1/databases",
      body: { name: "analytics", region: "fsn1", tier: "small", version: "17" },
    });

    answers.push({ status: 201, body: { data: { id: "db-1", name: "analytics", password: "pw-once" }, meta: { request_id: "r" } } });
    fireEvent.click(screen.getByRole("button", { name: "Create database" }));
    await waitFor(() => expect(created).toEqual([{ id: "db-1", name: "analytics", password: "pw-once" }]));
  });
});

describe("confirming by name", () => {
  it("keeps the destructive button disabled until the exact name is typed", async () => {
    const { ConfirmByName } = await import("../src/components/ui.tsx");
    const confirmed: string[] = [];
    render(h(ConfirmByName, { name: "orders", action: "Delete database", onConfirm: () => confirmed.push("yes") }));
    const button = screen.getByRole("button", { name: "Delete database" }) as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    fireEvent.input(screen.getByLabelText("Type orders to delete database"), { target: { value: "order" } });
    expect(button.disabled).toBe(true);
    fireEvent.submit(button.form!);
    expect(confirmed).toEqual([]);
    fireEvent.input(screen.getByLabelText("Type orders to delete database"), { target: { value: "orders" } });
    expect(button.disabled).toBe(false);
    fireEvent.click(button);
    expect(confirmed).toEqual(["yes"]);
  });

  it("opened from a row's button: says what happens, takes the focus, and is left by its keep button or Escape", async () => {
    const { ConfirmByName } = await import("../src/components/ui.tsx");
    const events: string[] = [];
    render(
      h(
        ConfirmByName,
        { name: "ci", action: "Revoke ci", onConfirm: () => events.push("revoked"), onCancel: () => events.push("kept") },
        h("p", null, "Scripts using this key are refused from then on."),
      ),
    );
    const input = screen.getByLabelText("Type ci to revoke ci");
    await waitFor(() => expect(document.activeElement).toBe(input));
    expect(screen.getByText("Scripts using this key are refused from then on.")).toBeTruthy();
    fireEvent.click(screen.getByRole("button", { name: "Keep ci" }));
    fireEvent.keyDown(input, { key: "Escape" });
    expect(events).toEqual(["kept", "kept"]);
    fireEvent.input(input, { target: { value: "ci" } });
    fireEvent.click(screen.getByRole("button", { name: "Revoke ci" }));
    expect(events).toEqual(["kept", "kept", "revoked"]);
  });
});
