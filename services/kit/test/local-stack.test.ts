import { describe, expect, it } from "vitest";
import { layoutProblems, localStackLayout } from "../src/local-stack.ts";

describe("the local stack's layout", () => {
  it("derives every port from PORT unless a service's own setting moves it", () => {
    const l = localStackLayout({
      PORT: "9000",
      BILLING_PORT: "9500",
      LOCAL_AGENTS: "fsn1;nbg1,hel1",
      AGENT_CAPACITY: "10",
      DBAAS_DATA_DIR: "/tmp/x",
    });
    expect([l.gateway, l.identity, l.databases, l.billing]).toEqual([9000, 9001, 9002, 9500]);
    expect(l.dataDir).toBe("/tmp/x");
    expect(l.agents).toEqual([
      {
        id: "agent-fsn1",
        publicAddress: "127.0.0.1",
        regions: "fsn1",
        poolerPortOffset: 20,
        port: 9010,
        instancePorts: [15400, 15409],
        tenantUids: [200000, 249999],
      },
      {
        id: "agent-nbg1",
        publicAddress: "127.0.0.1",
        regions: "nbg1,hel1",
        poolerPortOffset: 20,
        port: 9011,
        instancePorts: [15410, 15419],
        tenantUids: [250000, 299999],
      },
    ]);
  });

  it("simulates hosts when the stack keeps DNS records: the n-th agent on 127.0.0.(n+1), the same ports, ids apart", () => {
    const l = localStackLayout({ LOCAL_AGENTS: "fsn1;fsn1;fsn1", AGENT_CAPACITY: "10", DNS_PROVIDER: "rfc2136", AGENT_BASE_PORT: "9010" });
    expect(l.agents).toEqual([
      {
        id: "agent-fsn1",
        publicAddress: "127.0.0.2",
        regions: "fsn1",
        poolerPortOffset: 10,
        port: 9010,
        instancePorts: [15400, 15409],
        tenantUids: [200000, 233332],
      },
      {
        id: "agent-fsn1-2",
        publicAddress: "127.0.0.3",
        regions: "fsn1",
        poolerPortOffset: 10,
        port: 9011,
        instancePorts: [15400, 15409],
        tenantUids: [233333, 266665],
      },
      {
        id: "agent-fsn1-3",
        publicAddress: "127.0.0.4",
        regions: "fsn1",
        poolerPortOffset: 10,
        port: 9012,
        instancePorts: [15400, 15409],
        tenantUids: [266666, 299998],
      },
    ]);
    expect(layoutProblems(l, true)).toEqual([]);
  });

  it("gives each agent its own slice of AGENT_TENANT_UID_RANGE: no two agents on the machine hand out one uid", () => {
    expect(
      localStackLayout({ LOCAL_AGENTS: "fsn1;nbg1", AGENT_TENANT_UID_RANGE: "300000-300009" }).agents.map((a) => a.tenantUids),
    ).toEqual([
      [300000, 300004],
      [300005, 300009],
    ]);
    expect(() => localStackLayout({ LOCAL_AGENTS: "fsn1;nbg1;hel1", AGENT_TENANT_UID_RANGE: "300000-300001" })).toThrow(
      /AGENT_TENANT_UID_RANGE must be <first>-<last> with a uid for each of the 3 agents, got "300000-300001"/,
    );
  });

  it("accepts the defaults", () => {
    expect(layoutProblems(localStackLayout({}), true)).toEqual([]);
  });

  it("refuses a stack port inside an agent's instance range, naming both settings", () => {
    const l = localStackLayout({ METADATA_PG_PORT: "15450" });
    const problems = layoutProblems(l, true);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain("METADATA_PG_PORT=15450 (metadata PostgreSQL) lies inside the instance ports of agent-fsn1 (15400–15599");
    expect(problems[0]).toContain("INSTANCE_PORT_BASE");
    // With DATABASE_URL set there is no embedded metadata PostgreSQL to collide with.
    expect(layoutProblems(l, false)).toEqual([]);
    expect(layoutProblems(localStackLayout({ PORT: "15500" }), false).join("\n")).toContain("PORT=15500 (gateway) lies inside");
  });

  it("puts the poolers' ports past the instances' and refuses a stack port among them", () => {
    const l = localStackLayout({ PORT: "9000", LOCAL_AGENTS: "fsn1;nbg1", AGENT_CAPACITY: "10", METADATA_PG_PORT: "15425" });
    // Instances 15400–15419 (two agents), poolers 15420–15439.
    expect(layoutProblems(l, true).join("\n")).toContain(
      "METADATA_PG_PORT=15425 (metadata PostgreSQL) lies inside the pooler ports of agent-fsn1 (15420–15429",
    );
    expect(layoutProblems(l, false)).toEqual([]);
  });

  it("refuses two processes on one port and ranges past 65535", () => {
    expect(layoutProblems(localStackLayout({ IDENTITY_PORT: "8080" }), false)).toEqual([
      "identity and gateway would both listen on port 8080: change IDENTITY_PORT or PORT",
    ]);
    expect(layoutProblems(localStackLayout({ INSTANCE_PORT_BASE: "65500" }), false).join("\n")).toContain("leave 1–65535");
  });

  it("with LOCAL_REPLICAS=2, puts two instances of each scaled service from REPLICA_BASE_PORT and checks their ports too", () => {
    const one = localStackLayout({ PORT: "9000" });
    expect(one.replicas).toBe(1);
    expect(one.instances).toEqual({ gateway: [9000], identity: [9001], databases: [9002], billing: [9003] });
    const l = localStackLayout({ PORT: "9000", LOCAL_REPLICAS: "2" });
    expect(l.instances).toEqual({ gateway: [9020, 9021], identity: [9022, 9023], databases: [9024, 9025], billing: [9026, 9027] });
    // The service ports stay where clients look for them: the runner's balancer listens there.
    expect([l.gateway, l.identity, l.databases, l.billing]).toEqual([9000, 9001, 9002, 9003]);
    expect(layoutProblems(l, true)).toEqual([]);
    expect(layoutProblems(localStackLayout({ PORT: "9000", LOCAL_REPLICAS: "2", REPLICA_BASE_PORT: "9009" }), true).join("\n")).toContain(
      "agent-fsn1 and gateway-2 instance would both listen on port 9010",
    );
    expect(layoutProblems(localStackLayout({ LOCAL_REPLICAS: "9" }), true)).toContain(
      "LOCAL_REPLICAS must be a whole number from 1 to 4, got 9",
    );
  });
});
