/**
 * Issue 22: trusted sources on real instances (docs/product.md, Trusted sources and connection
 * pooling). The local stack's agent publishes on 127.0.0.1; clients bind other loopback addresses
 * (127.0.0.x) as their source. Once a database lists a source, a session from any other address is
 * refused before PostgreSQL sees it, on its published port and on its replica's; adding the address
 * admits it, removing it or letting it expire refuses it again, and an empty list admits everyone.
 * Another organization gets 404. Its agent has no PgBouncer: the database works without a pooler and says
 * why. The refusals are polled (at most 60 s each); how long they took is printed, measured in
 * `npm run bench:edge`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type createApi, waitStatus } from "../support/api.ts";
import { admitted, attempt, refused, untilAttempt } from "../support/edge.ts";
import { createTestDatabase, type TestDatabase } from "../support/pg.ts";
import { account, waitReplica, withPassword } from "../support/replicas.ts";
import { startStack, type Stack } from "../support/stack.ts";

let stack: Stack;
let meta: TestDatabase;

beforeAll(async () => {
  meta = await createTestDatabase("e2e_trusted_sources");
  stack = await startStack({
    databaseUrl: meta.url,
    agents: "fsn1",
    // This stack's agent has no PgBouncer: its databases work without a pooler and say why.
    env: { BACKUP_SCHEDULE_INTERVAL_MS: "1000", PGBOUNCER_PATH: "/nonexistent/pgbouncer" },
  });
}, 180_000);

afterAll(async () => {
  await stack?.destroy();
  await meta?.drop();
});

const A = "127.0.0.5";
const B = "127.0.0.6";

describe("trusted sources on real instances", { timeout: 300_000 }, () => {
  let api: ReturnType<typeof createApi>;
  let db: { id: string; password: string; connection_string: string };

  it("a listed source admits only itself; adding, removing and expiry follow within seconds", async () => {
    api = await account(stack, "ts");
    const created = await api.post("/v1/databases", { name: "guarded", region: "fsn1", tier: "micro" });
    expect(created.status).toBe(201);
    db = created.body.data;
    await waitStatus(api, db.id, "running", 120_000, stack.output);
    const cs = db.connection_string;
    expect(await attempt(A, cs)).toBe("ok");
    expect(await attempt(B, cs)).toBe("ok");

    const onlyB = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: `${B}/32`, description: "B" });
    expect(onlyB.status, JSON.stringify(onlyB.body)).toBe(201);
    const r1 = await untilAttempt("A refused once B alone is trusted", A, cs, refused);
    expect(await attempt(B, cs)).toBe("ok");

    const addA = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: A });
    expect(addA.status).toBe(201);
    expect(addA.body.data.cidr).toBe(`${A}/32`);
    const r2 = await untilAttempt("A admitted once trusted", A, cs, admitted);

    expect((await api.delete(`/v1/databases/${db.id}/trusted-sources/${addA.body.data.id}`)).status).toBe(204);
    const r3 = await untilAttempt("A refused again once removed", A, cs, refused);

    const soon = new Date(Date.now() + 8_000).toISOString();
    const temp = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: `${A}/32`, expires_at: soon });
    expect(temp.status).toBe(201);
    await untilAttempt("A admitted while its temporary entry lasts", A, cs, admitted);
    const r4 = await untilAttempt("A refused once its entry expired", A, cs, refused, 60_000);
    const late = Date.now() - new Date(soon).getTime();
    const listed = await api.get(`/v1/databases/${db.id}/trusted-sources`);
    expect(listed.body.data.trusted_sources.map((t: { cidr: string }) => t.cidr)).toEqual([`${B}/32`]);
    console.log(
      `trusted sources: refused after ${r1.ms} ms, admitted after ${r2.ms} ms, refused after removal ${r3.ms} ms, ` +
        `expired entry refused ${late} ms after expires_at (${r4.ms} ms of polling)`,
    );

    // An empty list admits everyone again.
    expect((await api.delete(`/v1/databases/${db.id}/trusted-sources/${onlyB.body.data.id}`)).status).toBe(204);
    await untilAttempt("A admitted with the list empty", A, cs, admitted);
  });

  it("a host without PgBouncer: the database works, its pooler is off and says why", async () => {
    const p = await api.get(`/v1/databases/${db.id}/pooler`);
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({ enabled: false, mode: "transaction" });
    expect(p.body.data.reason).toContain("PgBouncer is not installed on this host (/nonexistent/pgbouncer)");
    expect(p.body.data.host).toBeUndefined();
    expect((await api.patch(`/v1/databases/${db.id}/pooler`, { enabled: true })).status).toBe(409);
    expect(await attempt(A, db.connection_string)).toBe("ok");
  });

  it("422 names the network meant; another organization sees 404", async () => {
    const bad = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: "10.1.2.3/8" });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details).toEqual([{ field: "cidr", message: expect.stringContaining("did you mean 10.0.0.0/8") }]);
    const v6 = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: "2001:DB8::/32" });
    expect(v6.status).toBe(201);
    expect(v6.body.data.cidr).toBe("2001:db8::/32");
    // An IPv6-only list: no IPv4 client is trusted.
    await untilAttempt("IPv4 refused under an IPv6-only list", A, db.connection_string, refused);
    expect((await api.delete(`/v1/databases/${db.id}/trusted-sources/${v6.body.data.id}`)).status).toBe(204);
    const stranger = await account(stack, "ts-other");
    expect((await stranger.get(`/v1/databases/${db.id}/trusted-sources`)).status).toBe(404);
    expect((await stranger.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: "10.0.0.0/8" })).status).toBe(404);
  });

  it("a replica admits whom its primary admits", async () => {
    await api.addPaymentMethod();
    const made = await api.post(`/v1/databases/${db.id}/replicas`, { name: "guarded-ro" });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const replica = await waitReplica(api, db.id, made.body.data.id, "running", 180_000);
    const rcs = withPassword(replica.connection_string, db.password);
    expect(await attempt(A, rcs)).toBe("ok");
    const onlyB = await api.post(`/v1/databases/${db.id}/trusted-sources`, { cidr: `${B}/32` });
    expect(onlyB.status).toBe(201);
    await untilAttempt("A refused at the replica", A, rcs, refused);
    expect(await attempt(B, rcs)).toBe("ok");
    expect((await api.delete(`/v1/databases/${db.id}/trusted-sources/${onlyB.body.data.id}`)).status).toBe(204);
    await untilAttempt("A admitted at the replica again", A, rcs, admitted);
  });
});
