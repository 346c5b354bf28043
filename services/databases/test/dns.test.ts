import { ObservedState } from "@dbaas/proto/agent";
import { type Named, namedMissing, startNamed } from "@dbaas/test/support/named";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readDnsConfig } from "../src/dns/config.ts";
import { createHostRecords, reconcileRecords } from "../src/dns/records.ts";
import { DnsError, parseServer, parseTsigKey, rfc2136Client } from "../src/dns/wire.ts";
import type { Clock } from "@dbaas/kit";
import { createSupervisorState, superviseHighAvailability } from "../src/high-availability.ts";
import { completeBackup, createDb, createHarness, DOMAIN, registerAgent, report, specOf, statusOf, type Harness } from "./harness.ts";

/*
 * The rfc2136 adapter against a real BIND (test/support/named.ts): records
 * set, replaced and deleted as `dig` sees them, a wrong key refused by the
 * server and named; and the lifecycle around it — never running before the
 * record resolves, records gone with deletes, following an agent's new
 * address, repaired by the reconcile.
 */

const missing = namedMissing();
if (missing) console.warn(`dns.test.ts skipped: ${missing}`);

const ORG = "org-dns";
const AGENT = "dns-a";
const host = (id: string) => `${id}.${DOMAIN}`;

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Reports `id` running (its current spec) through `client`, a service whose DNS adapter a test swapped. */
async function reportRunningVia(h: Harness, client: ReturnType<Harness["agentsWith"]>, id: string): Promise<void> {
  const spec = (await specOf(h, AGENT, id))!;
  await client.reportInstances({
    agentId: AGENT,
    instances: [
      {
        databaseId: id,
        state: ObservedState.RUNNING,
        observedGeneration: spec.generation,
        appliedCredentialsGeneration: spec.credentialsGeneration,
      },
    ],
  });
}

describe.skipIf(missing !== undefined)("DNS records through RFC 2136 (real BIND)", () => {
  let named: Named;
  let h: Harness;

  beforeAll(async () => {
    named = await startNamed(DOMAIN);
    h = await createHarness({
      DNS_PROVIDER: "rfc2136",
      DNS_SERVER: named.server,
      DNS_ZONE: DOMAIN,
      DNS_TSIG_KEY: named.tsigKey,
      DNS_TTL_SECONDS: "30",
    });
    await registerAgent(h, AGENT, { addresses: ["127.0.0.2"] });
  }, 90_000);

  afterAll(async () => {
    await h?.close();
    await named?.stop();
  });

  it("the adapter adds, replaces and deletes a name's A and AAAA records, as dig sees them", async () => {
    const client = rfc2136Client(parseServer(named.server), parseTsigKey(named.tsigKey), 5000);
    const name = `adapter.${DOMAIN}`;
    await client.update(DOMAIN, name, ["127.0.0.2", "::1"], 30);
    expect(await named.dig(name, "A")).toEqual(["127.0.0.2"]);
    expect(await named.dig(name, "AAAA")).toEqual(["::1"]);
    expect(await client.lookup(name)).toEqual([
      { address: "127.0.0.2", ttl: 30 },
      { address: "::1", ttl: 30 },
    ]);
    await client.update(DOMAIN, name, ["127.0.0.3"], 5);
    expect(await named.dig(name, "A")).toEqual(["127.0.0.3"]);
    expect(await named.dig(name, "AAAA")).toEqual([]);
    expect(await client.lookup(name)).toEqual([{ address: "127.0.0.3", ttl: 5 }]);
    await client.update(DOMAIN, name, [], 30);
    expect(await named.digStatus(name)).toBe("NXDOMAIN");
    expect(await client.lookup(name)).toEqual([]);
  });

  it("a wrong TSIG key is refused by the server, and the error says which part is wrong", async () => {
    const wrongSecret = rfc2136Client(
      parseServer(named.server),
      parseTsigKey(`hmac-sha256:${named.keyName}:${Buffer.alloc(32, 7).toString("base64")}`),
      5000,
    );
    const err = await wrongSecret.update(DOMAIN, `intruder.${DOMAIN}`, ["127.0.0.9"], 30).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DnsError);
    expect((err as DnsError).message).toMatch(/refused our TSIG key "dbaas-test-key": BADSIG/);
    expect((err as DnsError).tsigError).toBe(16);
    const unknownKey = rfc2136Client(parseServer(named.server), parseTsigKey(`hmac-sha256:nobody:${named.secret}`), 5000);
    await expect(unknownKey.update(DOMAIN, `intruder.${DOMAIN}`, ["127.0.0.9"], 30)).rejects.toThrow(/BADKEY/);
    expect(await named.digStatus(`intruder.${DOMAIN}`)).toBe("NXDOMAIN");
    expect(named.output()).toMatch(/request has invalid signature|tsig verify failure|bad key|BADSIG/i);
  });

  it("DNS_TSIG_KEY, DNS_SERVER and DNS_ZONE are checked at start, naming what is wrong", () => {
    const base = { DNS_PROVIDER: "rfc2136", DNS_SERVER: named.server, DNS_ZONE: DOMAIN, DNS_TSIG_KEY: named.tsigKey };
    expect(() => readDnsConfig({ ...base, DNS_TSIG_KEY: "hmac-md5:k:c2VjcmV0c2VjcmV0c2VjcmV0" }, DOMAIN)).toThrow(/only hmac-sha256/);
    expect(() => readDnsConfig({ ...base, DNS_SERVER: "localhost" }, DOMAIN)).toThrow(/DNS_SERVER must look like/);
    expect(() => readDnsConfig({ ...base, DNS_ZONE: "other.test" }, DOMAIN)).toThrow(/must lie in DNS_ZONE/);
    expect(() => readDnsConfig({ DNS_PROVIDER: "rfc2136" }, DOMAIN)).toThrow(/needs DNS_SERVER, DNS_ZONE, DNS_TSIG_KEY/);
    expect(() => readDnsConfig({ DNS_PROVIDER: "route53" }, DOMAIN)).toThrow(/none or rfc2136/);
  });

  it("a database reported running stays provisioning while its record cannot be published, and runs once it resolves", async () => {
    const { database } = await createDb(h, ORG);
    const id = database!.id;
    // The same service, its DNS server unreachable.
    const closed = rfc2136Client(parseServer("127.0.0.1:1"), parseTsigKey(named.tsigKey), 2000);
    const unreachable = h.agentsWith({ dns: { ...createHostRecords(h.ctx.cfg)!, client: closed } });
    await reportRunningVia(h, unreachable, id);
    const waiting = (await h.dbs.getDatabase({ organizationId: ORG, id })).database!;
    expect(waiting.status).toBe("provisioning");
    expect(waiting.statusReason).toMatch(/^waiting for its DNS record: DNS server 127\.0\.0\.1:1: connection refused/);
    expect(await named.digStatus(host(id))).toBe("NXDOMAIN");
    const ops = (await h.dbs.listOperations({ organizationId: ORG, databaseId: id })).operations;
    expect(ops.find((o) => o.type === "create")?.status).toBe("running");

    // Reachable again: the next report publishes, then settles; the pooler's name too.
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect(await named.dig(host(id))).toEqual(["127.0.0.2"]);
    expect(await named.dig(host(`${id}-pooler`))).toEqual(["127.0.0.2"]);
    const running = (await h.dbs.getDatabase({ organizationId: ORG, id })).database!;
    expect(running.status).toBe("running");
    expect(running.statusReason).toBe("");
  });

  it("a wrong key keeps the database from running, with the server's refusal as its reason", async () => {
    const { database } = await createDb(h, ORG);
    const id = database!.id;
    const wrong = rfc2136Client(
      parseServer(named.server),
      parseTsigKey(`hmac-sha256:${named.keyName}:${Buffer.alloc(32, 9).toString("base64")}`),
      5000,
    );
    await reportRunningVia(h, h.agentsWith({ dns: { ...createHostRecords(h.ctx.cfg)!, client: wrong } }), id);
    const db = (await h.dbs.getDatabase({ organizationId: ORG, id })).database!;
    expect(db.status).toBe("provisioning");
    expect(db.statusReason).toContain("BADSIG (the key's secret does not match the server's)");
    expect(h.logs.some((l) => l.includes("DNS record not published") && l.includes(id))).toBe(true);
    // The secret never reaches a log line.
    expect(h.logs.join("\n")).not.toContain(named.secret);
  });

  it("a delete removes the record (NXDOMAIN); the reconcile repairs a record changed or lost behind our back", async () => {
    const a = (await createDb(h, ORG)).database!.id;
    const b = (await createDb(h, ORG)).database!.id;
    await report(h, AGENT, a, ObservedState.RUNNING);
    await report(h, AGENT, b, ObservedState.RUNNING);
    expect(await statusOf(h, ORG, a)).toBe("running");
    expect(await named.dig(host(a))).toEqual(["127.0.0.2"]);

    await named.nsupdate([
      `update delete ${host(a)} A`,
      `update add ${host(a)} 30 A 127.0.0.66`,
      `update delete ${host(b)} A`,
      `update delete ${host(`${b}-pooler`)} A`,
    ]);
    expect(await named.dig(host(a))).toEqual(["127.0.0.66"]);
    expect(await named.digStatus(host(b))).toBe("NXDOMAIN");
    expect(await reconcileRecords(h.ctx)).toBeGreaterThanOrEqual(2);
    expect(await named.dig(host(a))).toEqual(["127.0.0.2"]);
    expect(await named.dig(host(b))).toEqual(["127.0.0.2"]);
    expect(await named.dig(host(`${b}-pooler`))).toEqual(["127.0.0.2"]);
    // A TTL changed behind our back is repaired too.
    await named.nsupdate([`update delete ${host(a)} A`, `update add ${host(a)} 3600 A 127.0.0.2`]);
    await reconcileRecords(h.ctx);
    expect((await rfc2136Client(parseServer(named.server), parseTsigKey(named.tsigKey), 5000).lookup(host(a)))[0]?.ttl).toBe(30);

    await h.dbs.deleteDatabase({ organizationId: ORG, id: a });
    expect(await named.digStatus(host(a))).toBe("NXDOMAIN");
    expect(await named.digStatus(host(`${a}-pooler`))).toBe("NXDOMAIN");
    expect(await named.dig(host(b))).toEqual(["127.0.0.2"]);
    expect((await h.ctx.pool.query("SELECT 1 FROM dns_records WHERE name = $1", [host(a)])).rowCount).toBe(0);
  });

  it("a read replica gets its own record (no pooler name) before it shows running, and loses it with its delete", async () => {
    const primary = (await createDb(h, ORG)).database!.id;
    await report(h, AGENT, primary, ObservedState.RUNNING);
    const { replica } = await h.dbs.createReplica({
      organizationId: ORG,
      databaseId: primary,
      name: `dns-rep-${Date.now()}`,
      tier: "",
      region: "",
    });
    const id = replica!.id;
    const seed = (await h.ctx.pool.query("SELECT id FROM backups WHERE database_id = $1 AND status = 'running'", [primary])).rows[0]
      .id as string;
    await completeBackup(h, AGENT, primary, seed);
    const replicaStatus = async () => (await h.dbs.getReplica({ organizationId: ORG, databaseId: primary, replicaId: id })).replica!;

    // Reported running while its record cannot be published: not running yet, and saying why.
    const closed = rfc2136Client(parseServer("127.0.0.1:1"), parseTsigKey(named.tsigKey), 2000);
    await reportRunningVia(h, h.agentsWith({ dns: { ...createHostRecords(h.ctx.cfg)!, client: closed } }), id);
    const waiting = await replicaStatus();
    expect(waiting.status).toBe("provisioning");
    expect(waiting.statusReason).toMatch(/^waiting for its DNS record/);
    expect(await named.digStatus(host(id))).toBe("NXDOMAIN");

    // The next report publishes it, then it runs; a replica has no pooler of its own.
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect(await named.dig(host(id))).toEqual(["127.0.0.2"]);
    expect(await named.digStatus(host(`${id}-pooler`))).toBe("NXDOMAIN");
    expect((await replicaStatus()).status).toBe("running");

    await h.dbs.deleteReplica({ organizationId: ORG, databaseId: primary, replicaId: id });
    expect(await named.digStatus(host(id))).toBe("NXDOMAIN");
    expect(await named.dig(host(primary))).toEqual(["127.0.0.2"]);
  });

  it("records follow an agent to its new address", async () => {
    const id = (await createDb(h, ORG)).database!.id;
    await report(h, AGENT, id, ObservedState.RUNNING);
    expect(await named.dig(host(id))).toEqual(["127.0.0.2"]);
    await registerAgent(h, AGENT, { addresses: ["127.0.0.7", "::1"] });
    await until(
      "the record after the agent moved",
      () => named.dig(host(id)),
      (v) => v.join() === "127.0.0.7",
    );
    expect(await named.dig(host(id), "AAAA")).toEqual(["::1"]);
    await registerAgent(h, AGENT, { addresses: ["127.0.0.2"] });
    await until(
      "the record moved back",
      () => named.dig(host(id), "AAAA"),
      (v) => v.length === 0,
    );
  });

  it("a database with standbys: its record's TTL is 5 s, a standby has none, and a failover moves it to the standby's host", async () => {
    const other = "dns-b";
    await registerAgent(h, other, { addresses: ["127.0.0.3"] });
    const address: Record<string, string> = { [AGENT]: "127.0.0.2", [other]: "127.0.0.3" };
    // Created with a standby: placed at a port free on both hosts.
    const { database } = await h.dbs.createDatabase({
      organizationId: ORG,
      name: "dns-ha",
      region: "fsn1",
      tier: "micro",
      version: "",
      standbys: 1,
      synchronous: true,
    });
    const id = database!.id;
    const primaryAgent = (await h.ctx.pool.query("SELECT agent_id FROM databases WHERE id = $1", [id])).rows[0].agent_id as string;
    await report(h, primaryAgent, id, ObservedState.RUNNING);
    const lookup = () => rfc2136Client(parseServer(named.server), parseTsigKey(named.tsigKey), 5000).lookup(host(id));
    expect(await lookup()).toEqual([{ address: address[primaryAgent], ttl: 5 }]);
    // Without standbys the TTL is the default again, with them 5 s (PUT publishes at once).
    await h.dbs.setHighAvailability({ organizationId: ORG, databaseId: id, standbys: 0, synchronous: false });
    expect(await lookup()).toEqual([{ address: address[primaryAgent], ttl: 30 }]);
    await h.dbs.setHighAvailability({ organizationId: ORG, databaseId: id, standbys: 1, synchronous: true });
    expect(await lookup()).toEqual([{ address: address[primaryAgent], ttl: 5 }]);

    const standby = (
      await h.ctx.pool.query("SELECT id, agent_id FROM databases WHERE primary_id = $1 AND standby AND deleted_at IS NULL", [id])
    ).rows[0];
    const seed = (await h.ctx.pool.query("SELECT id FROM backups WHERE database_id = $1 AND status = 'running'", [id])).rows[0]
      .id as string;
    await completeBackup(h, primaryAgent, id, seed);
    const at = (s: number): Clock => ({ now: () => new Date(Date.now() + s * 1000) });
    await h.agents.renewLeases({ agentId: primaryAgent });
    // The primary's agent renews no more; the standby's reports it streaming, with its WAL, after the lease ended.
    const spec = (await specOf(h, standby.agent_id, standby.id))!;
    await h.agentsWith({ clock: at(11) }).reportInstances({
      agentId: standby.agent_id,
      instances: [
        {
          databaseId: standby.id,
          state: ObservedState.RUNNING,
          observedGeneration: spec.generation,
          appliedCredentialsGeneration: spec.credentialsGeneration,
          walPosition: 4096n,
        },
      ],
    });
    expect(await named.digStatus(host(standby.id))).toBe("NXDOMAIN");
    const state = { ...createSupervisorState(), healthySince: new Date(Date.now() - 3600_000), lastPassAt: Date.now() + 12_900 };
    expect(await superviseHighAvailability({ ...h.ctx, clock: at(13) }, state)).toBe(1);
    expect(await named.dig(host(id))).toEqual([address[standby.agent_id]]);
    expect(await statusOf(h, ORG, id)).toBe("starting");
    // The new server runs: the report publishes again (the gate before running), TTL 5 s.
    await report(h, standby.agent_id, id, ObservedState.RUNNING);
    expect(await statusOf(h, ORG, id)).toBe("running");
    expect(await lookup()).toEqual([{ address: address[standby.agent_id], ttl: 5 }]);
  });
});
