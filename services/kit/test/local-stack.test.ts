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
      { id: "agent-fsn1", regions: "fsn1", port: 9010, instancePorts: [15400, 15409] },
      { id: "agent-nbg1", regions: "nbg1,hel1", port: 9011, instancePorts: [15410, 15419] },
    ]);
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

  it("refuses two processes on one port and ranges past 65535", () => {
    expect(layoutProblems(localStackLayout({ IDENTITY_PORT: "8080" }), false)).toEqual([
      "identity and gateway would both listen on port 8080: change IDENTITY_PORT or PORT",
    ]);
    expect(layoutProblems(localStackLayout({ INSTANCE_PORT_BASE: "65500" }), false).join("\n")).toContain("leave 1–65535");
  });
});
