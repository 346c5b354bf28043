import os from "node:os";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tcpPortRefuses } from "../../src/instances/probe.ts";
import { replicationPassword } from "../../src/instances/replication.ts";
import type { InstanceRuntime } from "../../src/runtime.ts";
import { startHost, startInstance, type TestHost } from "../support/fixture.ts";

// A real server of an agent whose private address is not loopback (as on a
// host, or in a pod, that replicas on other hosts stream from): it listens
// there only, clients reach it through the published port, and the
// replication role logs in over TLS at that address with its derived password.

const SECRET = "private-address-secret";
/** An IPv4 address of this host other than loopback, if it has one. */
const address = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i && i.family === "IPv4" && !i.internal)?.address;

describe.skipIf(!address)("an instance on a non-loopback private address", { timeout: 120_000 }, () => {
  const id = "db-privaddr";
  let host: TestHost;
  let runtime: InstanceRuntime;
  let port: number;
  let password: string;

  beforeAll(async () => {
    host = await startHost("privaddr", { replicationSecret: SECRET, privateAddress: address!, privateNetwork: `${address}/32` });
    runtime = host.runtime;
    ({ port, password } = await startInstance(host, id));
  });

  afterAll(() => host?.close());

  const client = (o: pg.ClientConfig) => {
    const c = new pg.Client({ ssl: { rejectUnauthorized: false }, connectionTimeoutMillis: 5000, ...o });
    c.on("error", () => {});
    return c;
  };

  it("listens on the private address only, reports it, and serves clients on the published port", async () => {
    const obs = await runtime.observe(id);
    expect(obs.state).toBe("running");
    expect(obs.replicationAddress).toBe(address);
    const privatePort = obs.replicationPort!;
    expect(await tcpPortRefuses(address!, privatePort, 1000)).toBe(false);
    const c = client({ host: "127.0.0.1", port, user: "dbadmin", password, database: "defaultdb" });
    await c.connect();
    expect((await c.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    // The server's own word, not a probe of 127.0.0.1:<private port>, which another test's server may hold.
    expect((await c.query("SHOW listen_addresses")).rows).toEqual([{ listen_addresses: address }]);
    await c.end();
  });

  it("lets the replication role stream from the private network, over TLS with the derived password", async () => {
    const { replicationPort } = await runtime.observe(id);
    const c = client({
      host: address,
      port: replicationPort,
      user: "dbaas_replication",
      password: replicationPassword(SECRET, id),
      database: "replication",
      replication: "true",
    } as pg.ClientConfig);
    await c.connect();
    const { rows } = await c.query("IDENTIFY_SYSTEM");
    expect(rows[0]).toHaveProperty("systemid");
    await c.end();
    // A wrong password is refused: the line admits SCRAM, not trust.
    const bad = client({
      host: address,
      port: replicationPort,
      user: "dbaas_replication",
      password: "wrong",
      database: "replication",
      replication: "true",
    } as pg.ClientConfig);
    await expect(bad.connect()).rejects.toMatchObject({ code: "28P01" });
  });

  it("stops: its private port refuses", async () => {
    const { replicationPort } = await runtime.observe(id);
    await runtime.stop(id);
    expect(await tcpPortRefuses(address!, replicationPort!, 1000)).toBe(true);
  });
});
