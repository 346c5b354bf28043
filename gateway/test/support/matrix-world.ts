/**
 * The organizations the authorization matrix (matrix.test.ts) runs in: one of
 * each role, an API key scoped to `databases:read`, and a resource of every
 * kind, made through the real identity service and the stub databases and
 * billing, plus the permissions per role of docs/product.md (Roles and permissions) to judge the answers by.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createInternalClient } from "@dbaas/kit";
import { BillingService, InvoiceSchema } from "@dbaas/proto/billing";
import { DatabasesService } from "@dbaas/proto/databases";
import { Role } from "@dbaas/proto/identity";
import type { Permission } from "../../src/routes/route.ts";
import { createWorld, join, uniqueEmail, type RealIdentity, type RoleName, type World } from "./identity.ts";
import { SECRET, type Stubs } from "./stubs.ts";
import { SPEC_2_7 } from "@dbaas/test/support/spec-roles";

export { SPEC_2_7 };

/** The scoped key is the owner's, restricted to one scope. */
export const KEY_SCOPES: Permission[] = ["databases:read"];

export interface MatrixWorld extends World {
  key: string;
  /** A database, an invitation, an API key, a payment method of this organization that requests may use and must not destroy. */
  database: string;
  /** An invoice of this organization, seeded in the billing stub. */
  invoice: string;
  /** Every id of a resource of this organization: what another organization must never see in a list. */
  ids: Set<string>;
}

/** Makers of fresh resources in a world; each adds the new id to the world's `ids`. */
export function matrixFixtures(stubs: Stubs, identity: RealIdentity) {
  const dbClient = () => createInternalClient(DatabasesService, stubs.databasesUrl, { secret: SECRET, caller: "test" });
  const billingClient = () => createInternalClient(BillingService, stubs.billingUrl, { secret: SECRET, caller: "test" });
  let serial = 0;

  async function freshDatabase(w: MatrixWorld): Promise<string> {
    const res = await dbClient().createDatabase({ organizationId: w.org, name: `matrix-${++serial}`, region: "fsn1", tier: "micro" });
    w.ids.add(res.database!.id);
    return res.database!.id;
  }

  /** A running database of the world with a running replica (the world has a default payment method). */
  async function freshReplica(w: MatrixWorld): Promise<{ database: string; replica: string }> {
    const database = await freshDatabase(w);
    stubs.state.databases.get(database)!.db.status = "running";
    const res = await dbClient().createReplica({ organizationId: w.org, databaseId: database, name: `replica-${++serial}` });
    const replica = res.replica!.id;
    stubs.state.replicas.get(replica)!.status = "running";
    w.ids.add(replica);
    return { database, replica };
  }

  async function freshTrustedSource(w: MatrixWorld): Promise<{ database: string; trustedSource: string }> {
    const database = await freshDatabase(w);
    const res = await dbClient().createTrustedSource({ organizationId: w.org, databaseId: database, cidr: "10.0.0.0/8", description: "" });
    const trustedSource = res.trustedSource!.id;
    w.ids.add(trustedSource);
    return { database, trustedSource };
  }

  async function freshMember(w: MatrixWorld): Promise<string> {
    const m = await join(identity, w.org, w.users.owner.id, "viewer");
    w.ids.add(m.memberId);
    return m.memberId;
  }

  async function freshInvitation(w: MatrixWorld): Promise<string> {
    const res = await identity.client.createInvitation({
      organizationId: w.org,
      actor: { userId: w.users.owner.id, role: Role.OWNER },
      email: uniqueEmail("invitee"),
      role: "viewer",
    });
    w.ids.add(res.invitation!.id);
    return res.invitation!.id;
  }

  /** A key made by `role`'s member of the world, through a login session of theirs. */
  async function freshApiKey(w: MatrixWorld, scopes: string[] = [], role: RoleName = "owner"): Promise<{ id: string; secret: string }> {
    const actor = { userId: w.users[role].id, role: Role[role.toUpperCase() as Uppercase<RoleName>], permissions: SPEC_2_7[role] };
    const res = await identity.client.createApiKey({ organizationId: w.org, actor, name: `matrix ${role}`, scopes });
    w.ids.add(res.apiKey!.id);
    return { id: res.apiKey!.id, secret: res.secret };
  }

  async function freshAlert(w: MatrixWorld): Promise<string> {
    const res = await billingClient().createAlert({ organizationId: w.org, threshold: 50, currency: "USD", channels: ["email"] });
    w.ids.add(res.alert!.id);
    return res.alert!.id;
  }

  async function freshPaymentMethod(w: MatrixWorld): Promise<string> {
    const res = await billingClient().addPaymentMethod({ organizationId: w.org, type: "card", token: "tok_visa" });
    w.ids.add(res.paymentMethod!.id);
    return res.paymentMethod!.id;
  }

  function seedInvoice(w: MatrixWorld): string {
    const id = `inv-matrix${++serial}`;
    const invoice = create(InvoiceSchema, {
      id,
      organizationId: w.org,
      period: "2025-02",
      amount: 1.2,
      currency: "USD",
      status: "paid",
      issuedAt: timestampFromDate(new Date("2025-03-01T00:00:00Z")),
      dueAt: timestampFromDate(new Date("2025-03-01T00:00:00Z")),
      paidAt: timestampFromDate(new Date("2025-03-01T00:00:02Z")),
      lines: [{ description: "Compute, micro", quantity: 60, unit: "hour", amount: 1.2 }],
    });
    stubs.state.invoices.push({ invoice, pdf: Buffer.from("%PDF-1.7\n%%EOF\n"), filename: `invoice-2025-02-${id}.pdf` });
    w.ids.add(id);
    return id;
  }

  async function setupWorld(label: string, opts: { database: boolean }): Promise<MatrixWorld> {
    const world = await createWorld(identity, label);
    const w: MatrixWorld = {
      ...world,
      key: "",
      database: "",
      invoice: "",
      ids: new Set(Object.values(world.users).map((u) => u.memberId)),
    };
    w.key = (await freshApiKey(w, KEY_SCOPES)).secret;
    // Every member has a key of their own: members list only theirs (docs/product.md, Identity).
    for (const role of ["admin", "developer", "viewer"] as const) await freshApiKey(w, [], role);
    await freshInvitation(w);
    await freshPaymentMethod(w);
    await freshAlert(w);
    w.invoice = seedInvoice(w);
    if (opts.database) w.database = await freshDatabase(w);
    return w;
  }

  return {
    freshDatabase,
    freshReplica,
    freshTrustedSource,
    freshMember,
    freshInvitation,
    freshApiKey,
    freshAlert,
    freshPaymentMethod,
    setupWorld,
  };
}
