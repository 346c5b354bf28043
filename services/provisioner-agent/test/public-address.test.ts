import { ConfigError } from "@dbaas/kit";
import { describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";

// AGENT_PUBLIC_ADDRESS: where clients reach this agent's databases (registered with the databases
// service, which points their DNS names there), and where the published ports are bound by default.

const REQUIRED = {
  DATABASES_URL: "http://127.0.0.1:1",
  INTERNAL_AUTH_SECRET: "s",
  AGENT_REPLICATION_SECRET: "r",
  BACKUP_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString("base64"),
};

describe("the agent's public address", () => {
  it("defaults to 127.0.0.1, and the published ports are bound on it", () => {
    const cfg = readConfig(REQUIRED);
    expect(cfg.publicAddresses).toEqual(["127.0.0.1"]);
    expect(cfg.listenAddress).toBe("127.0.0.1");
  });

  it("takes IPv4 and IPv6 addresses, the ports bound on each unless AGENT_LISTEN_ADDRESS says otherwise", () => {
    const both = readConfig({ ...REQUIRED, AGENT_PUBLIC_ADDRESS: "127.0.0.3, ::1" });
    expect(both.publicAddresses).toEqual(["127.0.0.3", "::1"]);
    expect(both.listenAddress).toBe("127.0.0.3,::1");
    // Behind NAT: the node's address is published, the pod binds every address.
    const natted = readConfig({ ...REQUIRED, AGENT_PUBLIC_ADDRESS: "203.0.113.7", AGENT_LISTEN_ADDRESS: "0.0.0.0" });
    expect([natted.publicAddresses, natted.listenAddress]).toEqual([["203.0.113.7"], "0.0.0.0"]);
  });

  it("refuses a name or anything else that is no IP address, naming the setting", () => {
    expect(() => readConfig({ ...REQUIRED, AGENT_PUBLIC_ADDRESS: "db-host.example" })).toThrow(ConfigError);
    expect(() => readConfig({ ...REQUIRED, AGENT_PUBLIC_ADDRESS: "127.0.0.2,10.0.0.300" })).toThrow(
      /AGENT_PUBLIC_ADDRESS must list IPv4 or IPv6 addresses, got "10\.0\.0\.300"/,
    );
  });
});
