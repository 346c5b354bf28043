/**
 * The replication role's password is set only when it is not already the
 * derived one, one change at a time: a slot sync and a base backup may ensure
 * it at once, and two concurrent ALTER ROLEs of one role fail with "tuple
 * concurrently updated" (seen in the backups e2e after an agent restart).
 * Runs against the test PostgreSQL (TEST_DATABASE_URL), as its superuser.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureReplicationRole } from "../../src/instances/replication.ts";

const url = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const ROLE = "dbaas_replication";
const clients: pg.Client[] = [];

async function client(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  clients.push(c);
  return c;
}

const stored = async (c: pg.Client) =>
  (await c.query<{ pw: string | null }>("SELECT rolpassword AS pw FROM pg_authid WHERE rolname = $1", [ROLE])).rows[0]?.pw;

describe("the replication role", () => {
  let admin: pg.Client;
  beforeAll(async () => {
    admin = await client();
    await admin.query(`DROP ROLE IF EXISTS ${ROLE}`);
  });
  afterAll(async () => {
    await admin?.query(`DROP ROLE IF EXISTS ${ROLE}`);
    await Promise.all(clients.map((c) => c.end()));
  });

  it("is created and given the derived password once, however many ensure it at once", async () => {
    const others = await Promise.all(Array.from({ length: 6 }, () => client()));
    await Promise.all(others.map((c) => ensureReplicationRole(c, "a-secret", "db-one")));
    const first = await stored(admin);
    expect(first).toMatch(/^SCRAM-SHA-256\$4096:/);
    // Already the derived password: nothing changes (a fresh salt would give another verifier).
    await Promise.all(others.map((c) => ensureReplicationRole(c, "a-secret", "db-one")));
    expect(await stored(admin)).toBe(first);
    // Another primary's (a promoted replica becoming a primary) is a new password.
    await ensureReplicationRole(others[0]!, "a-secret", "db-two");
    expect(await stored(admin)).not.toBe(first);
  });
});
