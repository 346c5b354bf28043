import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, registerAgent, type Harness } from "./harness.ts";

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
  await registerAgent(h, "race-a", { capacity: 1000, ports: [40000, 40999] });
});

afterAll(async () => {
  await h?.close();
});

const ORG = "org-name-races";

const unexpected: string[] = [];

/** The Connect code a call ended with, by name ("OK" when it succeeded). */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (err) {
    const ce = ConnectError.from(err);
    if (![Code.AlreadyExists, Code.NotFound].includes(ce.code)) unexpected.push(`${Code[ce.code]}: ${ce.rawMessage} ${String(ce.cause)}`);
    return Code[ce.code]!;
  }
}

describe("names equal but for case, created and deleted concurrently", () => {
  it("answer OK, AlreadyExists or NotFound, never an internal error (no deadlock)", async () => {
    const outcomes = new Map<string, number>();
    const count = (o: string) => outcomes.set(o, (outcomes.get(o) ?? 0) + 1);
    // Each worker creates its spelling of the name and deletes what it created, over and over;
    // the others' creates meet its row while its delete has updated it.
    const worker = async (name: string) => {
      for (let round = 0; round < 60; round++) {
        const created = h.dbs.createDatabase({ organizationId: ORG, name, region: "fsn1", tier: "micro", version: "" });
        const o = await outcome(created);
        count(`create ${o}`);
        if (o !== "OK") continue;
        const id = (await created).database!.id;
        count(`delete ${await outcome(h.dbs.deleteDatabase({ organizationId: ORG, id }))}`);
      }
    };
    // And one renames databases of its own to the same name, then deletes them.
    const renamer = async () => {
      for (let round = 0; round < 40; round++) {
        const side = await h.dbs.createDatabase({ organizationId: ORG, name: `side-${round}`, region: "fsn1", tier: "micro", version: "" });
        const id = side.database!.id;
        count(`rename ${await outcome(h.dbs.updateDatabase({ organizationId: ORG, id, name: "OrDeRs" }))}`);
        count(`delete ${await outcome(h.dbs.deleteDatabase({ organizationId: ORG, id }))}`);
      }
    };
    await Promise.all([...["Orders", "orders", "ORDERS", "oRdErS"].map(worker), renamer()]);
    const seen = [...outcomes.keys()];
    const allowed = ["create OK", "create AlreadyExists", "rename OK", "rename AlreadyExists", "delete OK", "delete NotFound"];
    expect(
      seen.filter((o) => !allowed.includes(o)),
      `${JSON.stringify(Object.fromEntries(outcomes))} ${unexpected.join("; ")}`,
    ).toEqual([]);
    expect(outcomes.get("create OK")).toBeGreaterThan(0);
  });
});
