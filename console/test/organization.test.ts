// @vitest-environment happy-dom
/**
 * The API keys' create form (scopes, expiry) and the organization's settings (rename, plan, delete): their
 * logic (src/organization.ts) and their forms with the real client (sdks/node) over real HTTP to a local
 * server answering with the API's envelopes by route (browser.test.ts runs the same pages against the
 * real stack).
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ROLES, SCOPES as CATALOGUE_SCOPES } from "@dbaas/catalogue/scopes";
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/preact";
import { h } from "preact";
import { afterEach, describe, expect, it } from "vitest";
import { effectivePermissions } from "../../services/identity/src/authz.ts";
import { apiKeyRequest, canChangeSettings, isOwner, keyExpired, nextExpiry, SCOPES, scopesFor } from "../src/organization.ts";
import { list, ok, problem, scriptedApi } from "./support/scripted-api.ts";

const { seen, answer, routes } = scriptedApi("/organization");

afterEach(async () => {
  cleanup();
  // Imported once the server is up: the console's client talks to the page's origin, read when it loads.
  (await import("../src/session.ts")).signOut();
});

/** Preact renders a state change on the next tick: the submit handler then sees it. */
const settle = () => new Promise((r) => setTimeout(r, 0));

/** Signed in as a member of this role (the console reads the role once per token, from the members list). */
async function signedInAs(role: "owner" | "admin" | "developer" | "viewer") {
  const email = `${role}@example.com`;
  answer(
    "GET /v1/organization/members",
    200,
    list("members", [{ id: `member-${role}`, user: { id: `user-${role}`, email, name: role }, role, joined_at: "2026-11-01T00:00:00Z" }]),
  );
  const { signIn } = await import("../src/session.ts");
  signIn({ token: `dbs_${role}_${Math.random()}`, email, expiresAt: "2026-12-01T00:00:00Z" });
}

const org = { id: "org-1", name: "Acme", plan: "free", created_at: "2026-11-01T00:00:00Z" };
const key = {
  id: "key-1",
  name: "reader",
  scopes: ["databases:read", "metrics:read"],
  prefix: "dbk_ab12",
  role: "owner",
  created_by: "user-owner",
  created_at: "2026-11-28T10:00:00Z",
  expires_at: "2030-01-02T03:04:05Z",
};

/**
 * docs/product.md's table "Roles and permissions", read as written: the scopes in its order, and for each role the
 * scopes its column says "yes" to.
 */
function productMatrix(): { scopes: string[]; allowed: Record<string, string[]> } {
  const text = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "../../docs/product.md"), "utf8");
  const lines = text.slice(text.indexOf("## Roles and permissions")).split("\n").slice(1);
  const table = lines.slice(
    0,
    lines.findIndex((l, i) => i > 0 && !l.startsWith("|")),
  );
  const cells = (line: string) =>
    line
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
  const roles = cells(table[0]!).slice(2);
  const rows = table.slice(2).map(cells);
  const scopes = rows.map((r) => r[1]!.replaceAll("`", ""));
  const allowed = Object.fromEntries(
    roles.map((role, i) => [role, rows.filter((r) => r[2 + i] === "yes").map((r) => r[1]!.replaceAll("`", ""))]),
  );
  return { scopes, allowed };
}

describe("the scopes a key can have", () => {
  it("are the catalogue's list itself, not a copy; each role's as docs/product.md's table says, which identity enforces", () => {
    expect(SCOPES).toBe(CATALOGUE_SCOPES);
    const product = productMatrix();
    expect(product.scopes).toHaveLength(10);
    expect(SCOPES).toEqual(product.scopes);
    expect(Object.keys(product.allowed)).toEqual([...ROLES]);
    for (const role of ROLES) {
      expect(scopesFor(role), role).toEqual(product.allowed[role]);
      // What the form offers is what identity grants a login token (every scope) of that role.
      expect(effectivePermissions(role, SCOPES), role).toEqual(scopesFor(role));
    }
    // Unknown role: every scope (the API decides).
    expect(scopesFor(undefined)).toEqual(product.scopes);
  });

  it("the request: the ticked scopes in the API's order (none: omitted), the expiry in UTC (none: omitted)", () => {
    expect(apiKeyRequest("ci", [], "")).toEqual({ name: "ci" });
    const local = "2030-01-02T03:04:05";
    expect(apiKeyRequest("ci", ["metrics:read", "databases:read"], local)).toEqual({
      name: "ci",
      scopes: ["databases:read", "metrics:read"],
      expires_at: new Date(local).toISOString(),
    });
  });

  it("who may change what: settings for owner and admin, the plan and the deletion for the owner (unknown: the API decides)", () => {
    expect([canChangeSettings("owner"), canChangeSettings("admin"), canChangeSettings("developer"), canChangeSettings("viewer")]).toEqual([
      true,
      true,
      false,
      false,
    ]);
    expect([isOwner("owner"), isOwner("admin"), isOwner(undefined)]).toEqual([true, false, true]);
  });
});

describe("the API key form", () => {
  it("sends the ticked scopes and the expiry; the API's 422 is shown beside the expiry; the key is listed with its scopes", async () => {
    const { ApiKeys } = await import("../src/pages/organization.tsx");
    await signedInAs("owner");
    answer("GET /v1/organization/api-keys", 200, list("api_keys", []));
    answer("GET /v1/organization/api-keys", 200, list("api_keys", [key]));
    answer(
      "POST /v1/organization/api-keys",
      422,
      problem("validation_error", "The request is invalid", [{ field: "expires_at", message: "must be in the future" }]),
    );
    answer("POST /v1/organization/api-keys", 201, ok({ ...key, secret: "dbk_ab12_secret" }));
    render(h(ApiKeys, {}));
    await screen.findByText(/No API keys/);
    await waitFor(() => expect(screen.getAllByRole("checkbox")).toHaveLength(SCOPES.length));
    fireEvent.input(screen.getByLabelText("What the key is for"), { target: { value: "reader" } });
    fireEvent.click(screen.getByLabelText("metrics:read"));
    fireEvent.click(screen.getByLabelText("databases:read"));
    fireEvent.input(screen.getByLabelText("Expires (your time zone, optional)"), { target: { value: "2030-01-02T03:04:05" } });
    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Create API key" }));
    await waitFor(() => expect(document.getElementById("key-expires-error")?.textContent).toBe("must be in the future"));
    expect(screen.getByLabelText("Expires (your time zone, optional)").getAttribute("aria-invalid")).toBe("true");
    expect(seen.find((s) => s.method === "POST")?.body).toEqual({
      name: "reader",
      scopes: ["databases:read", "metrics:read"],
      expires_at: new Date("2030-01-02T03:04:05").toISOString(),
    });

    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Create API key" }));
    await waitFor(() => expect(screen.getByTestId("secret").textContent).toBe("dbk_ab12_secret"));
    await waitFor(() => expect(screen.getByTestId("key-scopes").textContent).toBe("databases:read, metrics:read"));
    // The form starts over: nothing ticked, no expiry.
    expect(screen.getAllByRole("checkbox").filter((c) => (c as HTMLInputElement).checked)).toHaveLength(0);
    expect((screen.getByLabelText("Expires (your time zone, optional)") as HTMLInputElement).value).toBe("");
  });

  it("offers a viewer only the viewer's scopes; the API's 422 about them is shown beside them", async () => {
    const { ApiKeys } = await import("../src/pages/organization.tsx");
    await signedInAs("viewer");
    answer("GET /v1/organization/api-keys", 200, list("api_keys", []));
    answer(
      "POST /v1/organization/api-keys",
      422,
      problem("validation_error", "The request is invalid", [
        { field: "scopes", message: "the viewer role does not allow: databases:write" },
      ]),
    );
    render(h(ApiKeys, {}));
    await waitFor(() =>
      expect(screen.getAllByRole("checkbox").map((c) => (c as HTMLInputElement).value)).toEqual([
        "databases:read",
        "metrics:read",
        "members:read",
      ]),
    );
    fireEvent.input(screen.getByLabelText("What the key is for"), { target: { value: "dash" } });
    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Create API key" }));
    await waitFor(() => expect(document.getElementById("key-scopes-error")?.textContent).toMatch(/does not allow/));
    expect(screen.getByRole("group", { name: "Scopes" }).getAttribute("aria-describedby")).toBe("key-scopes-error");
  });
});

describe("expired API keys", () => {
  it("are those whose expires_at has come (as identity judges them); the list next changes at the soonest expiry ahead", () => {
    const at = Date.parse("2026-11-28T12:00:00Z");
    expect(keyExpired(null, at)).toBe(false);
    expect(keyExpired("2026-11-28T12:00:00Z", at)).toBe(true);
    expect(keyExpired("2026-11-28T11:59:59Z", at)).toBe(true);
    expect(keyExpired("2026-11-28T12:00:01Z", at)).toBe(false);
    const keys = [
      { expires_at: null },
      { expires_at: "2026-11-28T11:00:00Z" },
      { expires_at: "2026-12-01T00:00:00Z" },
      { expires_at: "2026-11-29T00:00:00Z" },
    ];
    expect(nextExpiry(keys, at)).toBe(Date.parse("2026-11-29T00:00:00Z"));
    expect(nextExpiry(keys.slice(0, 2), at)).toBeUndefined();
  });

  it("are marked expired with their date (UTC on hover), a key expiring while the page is open marked then without a read; still revocable", async () => {
    const { ApiKeys } = await import("../src/pages/organization.tsx");
    await signedInAs("owner");
    const old = { ...key, id: "key-old", name: "old", expires_at: "2026-01-02T03:04:05Z" };
    const soon = { ...key, id: "key-soon", name: "soon", expires_at: new Date(Date.now() + 4_000).toISOString() };
    const never = { ...key, id: "key-never", name: "never", expires_at: null };
    answer("GET /v1/organization/api-keys", 200, list("api_keys", [old, soon, never, key]));
    answer("GET /v1/organization/api-keys", 200, list("api_keys", [soon, never, key]));
    answer("DELETE /v1/organization/api-keys/key-old", 204);
    render(h(ApiKeys, {}));
    const row = (name: string) => document.querySelector(`li[data-key="${name}"]`) as HTMLElement;
    await waitFor(() => expect(row("old")).not.toBeNull());
    expect(row("old").hasAttribute("data-expired")).toBe(true);
    expect(row("old").querySelector(".status")?.textContent).toBe("expired");
    const expired = row("old").querySelector("[data-testid=key-expired]")!;
    expect(expired.textContent).toMatch(/^Expired on /);
    expect(expired.querySelector("time")?.getAttribute("title")).toBe("2026-01-02 03:04:05 UTC");
    expect(expired.querySelector("time")?.getAttribute("datetime")).toBe(old.expires_at);
    // Live keys, with an expiry ahead or none, are not marked.
    for (const name of ["soon", "never", "reader"]) {
      expect(row(name).hasAttribute("data-expired"), name).toBe(false);
      expect(row(name).querySelector(".status"), name).toBeNull();
    }
    expect(row("soon").textContent).toContain("expires ");
    expect(row("never").textContent).not.toMatch(/expire/i);
    // Its time passes: marked, without reading the list again.
    await waitFor(() => expect(row("soon").hasAttribute("data-expired")).toBe(true), { timeout: 10_000 });
    expect(row("soon").querySelector("[data-testid=key-expired]")?.textContent).toMatch(/^Expired on /);
    expect(seen.filter((s) => s.method === "GET" && s.path === "/v1/organization/api-keys")).toHaveLength(1);

    // Revoked like any key, once its name is typed; the confirmation says it is refused already.
    fireEvent.click(screen.getByRole("button", { name: "Revoke old" }));
    await screen.findByText(/It has expired: the API refuses it already/);
    fireEvent.input(screen.getByLabelText("Type old to revoke old"), { target: { value: "old" } });
    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Revoke old" }));
    await waitFor(() => expect(row("old")).toBeNull());
    expect(seen.filter((s) => s.method === "DELETE").map((s) => s.path)).toEqual(["/v1/organization/api-keys/key-old"]);
  });
});

describe("the organization's settings", () => {
  it("renames (the API's 422 beside the name), refuses a paid plan without a card with a way to add one, and says so", async () => {
    const { OrganizationSettings } = await import("../src/pages/organization.tsx");
    await signedInAs("owner");
    answer("GET /v1/organization", 200, ok(org));
    answer(
      "PATCH /v1/organization",
      422,
      problem("validation_error", "The request is invalid", [{ field: "body.name", message: "must be at least 1 character" }]),
    );
    answer("PATCH /v1/organization", 200, ok({ ...org, name: "Acme Labs" }));
    answer("PATCH /v1/organization", 402, problem("payment_required", "to move to a paid plan, add a payment method"));
    const changed: unknown[] = [];
    render(h(OrganizationSettings, { onChanged: (o: unknown) => changed.push(o) }));
    await waitFor(() => expect(screen.getByTestId("org-name").textContent).toBe("Acme"));
    // Unchanged, the plan cannot be "changed".
    expect((screen.getByRole("button", { name: "Change plan" }) as HTMLButtonElement).disabled).toBe(true);

    fireEvent.input(screen.getByLabelText("Organization name"), { target: { value: " " } });
    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Rename" }));
    await waitFor(() => expect(document.getElementById("org-name-error")?.textContent).toBe("must be at least 1 character"));
    expect(screen.getByLabelText("Organization name").getAttribute("aria-invalid")).toBe("true");
    fireEvent.input(screen.getByLabelText("Organization name"), { target: { value: "Acme Labs" } });
    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Rename" }));
    await waitFor(() => expect(screen.getByTestId("org-name").textContent).toBe("Acme Labs"));
    expect(changed).toEqual([{ ...org, name: "Acme Labs" }]);
    expect(document.getElementById("org-name-error")).toBeNull();

    // A select's own change event (the library's `change` fires `input`, which Preact's onChange does not hear on a select).
    const select = screen.getByLabelText("Choose a plan") as HTMLSelectElement;
    select.value = "pro";
    select.dispatchEvent(new Event("change", { bubbles: true }));
    await settle();
    fireEvent.click(screen.getByRole("button", { name: "Change plan" }));
    await waitFor(() =>
      expect(screen.getByRole("link", { name: "Add a card on the billing page" }).getAttribute("href")).toBe("/billing#payment-methods"),
    );
    expect(screen.getByTestId("org-plan").textContent).toBe("free");
    expect(seen.filter((s) => s.method === "PATCH").map((s) => s.body)).toEqual([{ name: " " }, { name: "Acme Labs" }, { plan: "pro" }]);
  });

  it("deletes once the name is typed: the API's 409 shown while databases live; done, the session ends", async () => {
    const { OrganizationSettings } = await import("../src/pages/organization.tsx");
    await signedInAs("owner");
    answer("GET /v1/organization", 200, ok(org));
    answer("DELETE /v1/organization", 409, problem("conflict", "the organization still has 2 databases; delete them first"));
    answer("DELETE /v1/organization", 204);
    render(h(OrganizationSettings, { onChanged: () => {} }));
    const del = (await screen.findByRole("button", { name: "Delete organization" })) as HTMLButtonElement;
    expect(del.disabled).toBe(true);
    fireEvent.input(screen.getByLabelText("Type Acme to delete organization"), { target: { value: "Acme" } });
    await settle();
    fireEvent.click(del);
    await waitFor(() => expect(screen.getByRole("alert").textContent).toContain("still has 2 databases; delete them first"));
    expect(sessionStorage.getItem("dbaas.session")).not.toBeNull();
    await settle();
    fireEvent.click(del);
    await waitFor(() => expect(sessionStorage.getItem("dbaas.session")).toBeNull());
    expect(seen.filter((s) => s.method === "DELETE")).toHaveLength(2);
  });

  it("a viewer whose first read of the members list failed is still told, once a later read answers", async () => {
    const { OrganizationSettings } = await import("../src/pages/organization.tsx");
    // The members list answers 500 (not retried by the client) first: the role is read again, not taken as unknown for good.
    answer("GET /v1/organization/members", 500, problem("internal_error", "a moment"));
    await signedInAs("viewer");
    answer("GET /v1/organization", 200, ok(org));
    render(h(OrganizationSettings, { onChanged: () => {} }));
    await screen.findByTestId("read-only", {}, { timeout: 10_000 });
    expect(seen.filter((s) => s.path === "/v1/organization/members").length).toBeGreaterThanOrEqual(2);
    expect((screen.getByRole("button", { name: "Rename" }) as HTMLButtonElement).disabled).toBe(true);
  });

  it("Members: a viewer sees who is a member with every changing control disabled and a note; an admin may change them", async () => {
    const { Members } = await import("../src/pages/organization.tsx");
    const member = (role: string) => ({
      id: `member-${role}`,
      user: { id: `user-${role}`, email: `${role}@example.com`, name: role },
      role,
      joined_at: "2026-11-01T00:00:00Z",
    });
    const invitation = { id: "inv-1", email: "new@example.com", role: "developer", status: "pending", expires_at: "2026-12-05T00:00:00Z" };
    for (const role of ["viewer", "admin"] as const) {
      await signedInAs(role);
      answer("GET /v1/organization/members", 200, list("members", [member("owner"), member("developer"), member(role)]));
      answer("GET /v1/organization/invitations", 200, list("invitations", [invitation]));
      render(h(Members, {}));
      await screen.findByText("new@example.com · developer · pending, expires", { exact: false });
      const viewer = role === "viewer";
      if (viewer) await screen.findByTestId("read-only");
      else await waitFor(() => expect(seen.filter((x) => x.path === "/v1/organization/members").length).toBeGreaterThanOrEqual(2));
      await waitFor(() =>
        expect((screen.getByLabelText("Role of developer@example.com") as HTMLSelectElement).disabled, role).toBe(viewer),
      );
      expect((screen.getByRole("button", { name: "Remove developer@example.com" }) as HTMLButtonElement).disabled).toBe(viewer);
      expect((screen.getByRole("button", { name: "Cancel invitation to new@example.com" }) as HTMLButtonElement).disabled).toBe(viewer);
      expect(screen.getByLabelText("E-mail").closest("fieldset")?.disabled ?? false).toBe(viewer);
      expect((screen.getByRole("button", { name: "Send invitation" }) as HTMLButtonElement).disabled).toBe(viewer);
      expect(screen.queryByTestId("read-only") === null).toBe(!viewer);
      // Transferring ownership is the owner's alone: not offered to either.
      expect(screen.queryByRole("button", { name: "Transfer ownership" })).toBeNull();
      cleanup();
      (await import("../src/session.ts")).signOut();
      routes.clear();
      seen.length = 0;
    }
  });

  it("a viewer reads the settings with their controls disabled, and is offered no deletion", async () => {
    const { OrganizationSettings } = await import("../src/pages/organization.tsx");
    await signedInAs("viewer");
    answer("GET /v1/organization", 200, ok(org));
    render(h(OrganizationSettings, { onChanged: () => {} }));
    await screen.findByTestId("read-only");
    // Inside a disabled fieldset (SubmitForm's, read-only), and their buttons disabled.
    expect(screen.getByLabelText("Organization name").closest("fieldset")?.disabled).toBe(true);
    expect(screen.getByLabelText("Choose a plan").closest("fieldset")?.disabled).toBe(true);
    expect((screen.getByRole("button", { name: "Rename" }) as HTMLButtonElement).disabled).toBe(true);
    expect((screen.getByRole("button", { name: "Change plan" }) as HTMLButtonElement).disabled).toBe(true);
    expect(screen.queryByRole("button", { name: "Delete organization" })).toBeNull();
  });
});
