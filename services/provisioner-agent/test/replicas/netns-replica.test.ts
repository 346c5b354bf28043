import { readFile } from "node:fs/promises";
import path from "node:path";
import { create, toJsonString } from "@bufbuild/protobuf";
import { BackupState, InstanceSpecSchema, ReplicaSourceSchema } from "@dbaas/proto/agent";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackupManager } from "../../src/backups/backup-manager.ts";
import { createFileStore } from "../../src/backups/file-store.ts";
import { walSpoolRoot } from "../../src/instances/host.ts";
import { replicationPassword } from "../../src/instances/replication.ts";
import { type Fixture, managerFor, shutdown, view } from "../backups/support.ts";
import { instanceSpec, query, startHost, startInstance, type TestHost, tempDataDir, waitFor } from "../support/fixture.ts";
import { createNetns, type Netns, type NetnsChild, netnsUnusable, removeLeftovers, spawnChild } from "../support/netns.ts";

// A read replica on another host, as far as the network goes: its agent runs
// in a network namespace of its own (support/netns.ts), joined to the test's
// by a veth pair, and streams from a primary whose private address is this
// side of the veth. Only the blob store (a directory) is shared, as a region
// shares one. What crosses the boundary is what crosses it between hosts:
// routing to the primary's private address, the primary's pg_hba line for
// AGENT_PRIVATE_NETWORK, TLS verify-full against the primary's host name
// reached by hostaddr, the slot. The replica's side is
// support/netns-replica-child.ts, driven over JSON lines.

const unusable = netnsUnusable();
const SECRET = "netns-replica-secret";

/** The SQLSTATE (or error code) a call fails with; undefined when it succeeds. */
async function failure(run: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await run();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code ?? (e as Error).message;
  }
}

describe.skipIf(unusable)(
  `a replica in another network namespace${unusable ? ` (skipped: ${unusable})` : ""}`,
  { timeout: 120_000 },
  () => {
    const primaryId = "db-netrep";
    const replicaId = "rep-netrep";
    const slot = "dbaas_rep_netrep";
    let net: Netns;
    let outside: Netns | undefined;
    let host: TestHost;
    let fx: Fixture;
    let backups: BackupManager | undefined;
    let replica: NetnsChild | undefined;
    let stranger: NetnsChild | undefined;
    let password: string;
    let privatePort: number;

    beforeAll(async () => {
      removeLeftovers();
      net = createNetns("a", 0);
      const storeDir = await tempDataDir("netrep-store");
      const store = createFileStore(storeDir);
      // The primary's agent: private address on this side of the veth, replication admitted from the /30.
      host = await startHost("netrep", {
        store,
        replicationSecret: SECRET,
        privateAddress: net.rootAddress,
        privateNetwork: net.network,
        removeOnClose: [storeDir],
      });
      const p = await startInstance(host, primaryId);
      password = p.password;
      fx = {
        dataDir: host.dataDir,
        storeDir,
        store,
        m: host.m,
        runtime: host.runtime,
        id: primaryId,
        port: p.port,
        spec: p.spec,
        spoolDir: path.join(walSpoolRoot(host.dataDir), primaryId),
        sql: (text) => host.asAgent(primaryId, text),
        close: () => host.close(),
      };
      ({ manager: backups } = managerFor(fx));
      await backups.start();
      // The databases service's part: the replica's slot, then a seed backup taken after it.
      await host.runtime.syncReplicationSlots(primaryId, [slot]);
      await query(
        p.port,
        password,
        "CREATE TABLE items (id int PRIMARY KEY, note text); INSERT INTO items SELECT g, 'seed' FROM generate_series(1, 100) g",
      );
      backups.setDesired([{ ...p.spec, replicationSlots: [slot], backupIds: ["bkp-seed"] }]);
      const done = await waitFor(
        () => view(backups!, primaryId)?.backups.find((b) => b.backupId === "bkp-seed" && b.state !== BackupState.RUNNING),
        60_000,
        "seed backup",
      );
      expect(done.state).toBe(BackupState.COMPLETED);
      const obs = await host.runtime.observe(primaryId);
      expect(obs.replicationAddress).toBe(net.rootAddress);
      privatePort = obs.replicationPort!;
      // Committed after the seed: reaches the replica only by streaming across the veth.
      await query(p.port, password, "INSERT INTO items SELECT g, 'streamed' FROM generate_series(101, 150) g");

      const spec = instanceSpec({
        databaseId: replicaId,
        version: "17",
        port: 0,
        scramVerifier: p.spec.scramVerifier,
        replicaOf: create(ReplicaSourceSchema, {
          primaryDatabaseId: primaryId,
          primaryHost: p.spec.host,
          primaryCaPem: await host.runtime.caCertificatePem(),
          slotName: slot,
          primaryVersion: "17",
          primaryAddress: obs.replicationAddress!,
          primaryPort: privatePort,
          seedBackupId: "bkp-seed",
        }),
      });
      replica = spawnChild(net.name);
      await replica.call({
        op: "start",
        tag: "netrep-replica",
        storeDir,
        secret: SECRET,
        privateAddress: net.nsAddress,
        privateNetwork: `${net.nsAddress}/32`,
        spec: toJsonString(InstanceSpecSchema, spec),
      });
    }, 180_000);

    afterAll(async () => {
      await replica?.close();
      await stranger?.close();
      await shutdown(backups, fx);
      await host?.close();
      outside?.remove();
      net?.remove();
    }, 120_000);

    const onReplica = (sql: string) => replica!.call<Record<string, unknown>[]>({ op: "query", password, sql });

    it("streams from the primary's private address across the veth, as the primary sees it", async () => {
      const [receiver] = await replica!.call<Record<string, unknown>[]>({
        op: "agentSql",
        sql: "SELECT status, sender_host, sender_port, slot_name FROM pg_stat_wal_receiver",
      });
      // The WAL receiver names the host it verified (example.test resolves nowhere: hostaddr is what it connected to).
      expect(receiver).toEqual({
        status: "streaming",
        sender_host: `${primaryId}.example.test`,
        sender_port: privatePort,
        slot_name: slot,
      });
      const senders = await fx.sql(
        "SELECT client_addr, application_name, state, ssl FROM pg_stat_replication JOIN pg_stat_ssl USING (pid)",
      );
      expect(senders).toEqual([{ client_addr: net.nsAddress, application_name: replicaId, state: "streaming", ssl: true }]);
      const [s] = await fx.sql(`SELECT active FROM pg_replication_slots WHERE slot_name = '${slot}'`);
      expect(s).toEqual({ active: true });
      // verify-full against the primary's name, reached at its address.
      const [{ primary_conninfo: conninfo }] = (await replica!.call<Record<string, string>[]>({
        op: "agentSql",
        sql: "SHOW primary_conninfo",
      })) as [Record<string, string>];
      expect(conninfo).toContain(`host='${primaryId}.example.test' hostaddr='${net.rootAddress}' port=${privatePort} `);
      expect(conninfo).toContain("sslmode=verify-full");
    });

    it("serves what the primary commits, seeded and streamed, and refuses writes", async () => {
      expect(await onReplica("SELECT count(*)::int AS n FROM items")).toEqual([{ n: 150 }]);
      await query(fx.port, password, "INSERT INTO items VALUES (1000, 'live')");
      await waitFor(async () => (await onReplica("SELECT note FROM items WHERE id = 1000")).length === 1, 10_000, "row on the replica");
      expect(await failure(() => onReplica("INSERT INTO items VALUES (2000, 'nope')"))).toBe("25006");
    });

    it("is on another network: the primary's ports are not on the namespace's loopback, only its private address is reachable", async () => {
      const tcp = (h: string, port: number) => replica!.call<boolean>({ op: "tcp", host: h, port });
      expect(await tcp(net.rootAddress, privatePort)).toBe(true);
      expect(await tcp("127.0.0.1", privatePort)).toBe(false);
      expect(await tcp("127.0.0.1", fx.port)).toBe(false);
      // From the namespace, the replication role gets in with the derived password (the /30 is admitted).
      const login = {
        op: "replicationLogin" as const,
        host: net.rootAddress,
        port: privatePort,
        password: replicationPassword(SECRET, primaryId),
      };
      expect(await replica!.call(login)).toHaveProperty("systemid");
    });

    it("refuses replication from an address outside AGENT_PRIVATE_NETWORK, with the right password", async () => {
      outside = createNetns("b", 1);
      stranger = spawnChild(outside.name);
      const tcp = await stranger.call<boolean>({ op: "tcp", host: net.rootAddress, port: privatePort });
      // pg_hba admits replication from the private network alone …
      const hba = await readFile(path.join(host.dataDir, "instances", primaryId, "pg_hba.conf"), "utf8");
      expect(hba.match(/^hostssl\s+replication\s.*$/gm)).toEqual([`hostssl replication dbaas_replication ${net.network} scram-sha-256`]);
      if (host.m.proxy.sourceAddress === undefined) {
        // … and with the nftables meter its guard drops the connection before the server sees it (nft-meter.ts).
        expect(tcp).toBe(false);
        return;
      }
      // Without it, routed to the primary's address (so what refuses it is pg_hba, not the network) …
      expect(tcp).toBe(true);
      const err = await stranger
        .call({ op: "replicationLogin", host: net.rootAddress, port: privatePort, password: replicationPassword(SECRET, primaryId) })
        .then(
          () => undefined,
          (e: Error & { code?: string }) => e,
        );
      // … which has no line for it.
      expect(err?.code).toBe("28000");
      expect(err?.message).toContain(`no pg_hba.conf entry for replication connection from host "${outside.nsAddress}"`);
    });
  },
);
