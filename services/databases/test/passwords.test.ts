import { Code } from "@connectrpc/connect";
import { ObservedState } from "@dbaas/proto/agent";
import { testServerUrl } from "@dbaas/test/support/pg";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifiesScram } from "@dbaas/kit";
import { generatePassword } from "../src/scram.ts";
import { createDb, createHarness, eventually, expectCode, registerAgent, report, runningDb, specOf, type Harness } from "./harness.ts";

let h: Harness;
const AGENT = "pw-agent";
const ORG = "org-pw";

beforeAll(async () => {
  h = await createHarness();
  await registerAgent(h, AGENT, { capacity: 100 });
});

afterAll(async () => {
  await h?.close();
});

/** Settles to "pending" if `p` has not settled within `ms`. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<"resolved" | "rejected" | "pending"> {
  return await Promise.race([
    p.then(
      () => "resolved" as const,
      () => "rejected" as const,
    ),
    new Promise<"pending">((r) => setTimeout(() => r("pending"), ms)),
  ]);
}

describe("SCRAM verifiers", () => {
  it("are what PostgreSQL itself stores for the password", async () => {
    const admin = new pg.Client({ connectionString: await testServerUrl() });
    await admin.connect();
    const role = `scram_check_${Date.now()}`;
    const password = generatePassword();
    try {
      await admin.query("SET password_encryption = 'scram-sha-256'");
      await admin.query(`CREATE ROLE ${role} PASSWORD '${password}'`);
      const { rows } = await admin.query<{ rolpassword: string }>("SELECT rolpassword FROM pg_authid WHERE rolname = $1", [role]);
      const stored = rows[0]!.rolpassword;
      expect(stored).toMatch(/^SCRAM-SHA-256\$4096:/);
      expect(verifiesScram(stored, password)).toBe(true);
      expect(verifiesScram(stored, generatePassword())).toBe(false);
    } finally {
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    }
  });
});

describe("ResetPassword", () => {
  it("resolves only once the agent reports the new credentials applied", async () => {
    const created = await runningDb(h, ORG, AGENT);
    const id = created.database!.id;
    const before = await specOf(h, AGENT, id);
    expect(verifiesScram(before!.scramVerifier, created.password)).toBe(true);

    const reset = h.dbs.resetPassword({ organizationId: ORG, id });
    // The agent is handed the new verifier while the caller waits.
    const spec = await eventually(async () => {
      const s = await specOf(h, AGENT, id);
      return s!.credentialsGeneration > before!.credentialsGeneration && s;
    });
    expect(spec.credentialsGeneration).toBe(before!.credentialsGeneration + 1n);
    expect(await settledWithin(reset, 200)).toBe("pending");

    // An observation still carrying the old credentials is not confirmation.
    await report(h, AGENT, id, ObservedState.RUNNING, { credentials: before!.credentialsGeneration });
    expect(await settledWithin(reset, 200)).toBe("pending");

    await report(h, AGENT, id, ObservedState.RUNNING, { credentials: spec.credentialsGeneration });
    expect(await settledWithin(reset, 1000)).toBe("resolved");
    const { password, connectionString } = await reset;

    expect(password).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(password).not.toBe(created.password);
    expect(connectionString).toBe(created.connectionString.replace(created.password, password));
    expect(verifiesScram(spec.scramVerifier, password)).toBe(true);
    expect(verifiesScram(spec.scramVerifier, created.password)).toBe(false);
    const { rows } = await h.ctx.pool.query("SELECT row_to_json(d)::text AS t FROM databases d WHERE id = $1", [id]);
    expect(rows[0].t).not.toContain(password);
    expect(h.logs.join("\n")).not.toContain(password);
    // A password change is not a status change.
    expect((await h.dbs.getDatabase({ organizationId: ORG, id })).database!.status).toBe("running");
  });

  it("works on a stopped database, confirmed by the agent's STOPPED report", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const id = database!.id;
    await h.dbs.stopDatabase({ organizationId: ORG, id });
    await report(h, AGENT, id, ObservedState.STOPPED);
    const reset = h.dbs.resetPassword({ organizationId: ORG, id });
    await eventually(async () => (await specOf(h, AGENT, id))!.credentialsGeneration === 2n);
    await report(h, AGENT, id, ObservedState.STOPPED);
    const { password } = await reset;
    expect(verifiesScram((await specOf(h, AGENT, id))!.scramVerifier, password)).toBe(true);
  });

  it("fails with DEADLINE_EXCEEDED (never UNAVAILABLE: the new verifier is committed) when the agent does not confirm in time", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    const impatient = h.dbsWith({ passwordApplyTimeoutMs: 300 });
    const started = Date.now();
    const err = await expectCode(impatient.resetPassword({ organizationId: ORG, id: database!.id }), Code.DeadlineExceeded);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(err.rawMessage).toMatch(/did not confirm the new password in time/);
    expect(err.rawMessage).toMatch(/reset again/);
  });

  it("is refused while the database is provisioning or failed, naming the status", async () => {
    const { database } = await createDb(h, ORG);
    const err = await expectCode(h.dbs.resetPassword({ organizationId: ORG, id: database!.id }), Code.FailedPrecondition);
    expect(err.rawMessage).toBe("cannot reset the password of a database that is provisioning");
    expect((await specOf(h, AGENT, database!.id))!.credentialsGeneration).toBe(1n);

    await report(h, AGENT, database!.id, ObservedState.FAILED, { message: "boom" });
    const failed = await expectCode(h.dbs.resetPassword({ organizationId: ORG, id: database!.id }), Code.FailedPrecondition);
    expect(failed.rawMessage).toContain("failed");
  });

  it("answers NOT_FOUND for a deleted database", async () => {
    const { database } = await runningDb(h, ORG, AGENT);
    await h.dbs.deleteDatabase({ organizationId: ORG, id: database!.id });
    await expectCode(h.dbs.resetPassword({ organizationId: ORG, id: database!.id }), Code.NotFound);
  });
});
