import { describe, expect, it } from "vitest";
import { mergeParameters, misfits, replicaParameters } from "../src/inside/config.ts";
import { display, PARAMETERS, parameterSpec } from "../src/inside/parameters.ts";

// The allowlist's validation table (docs/product.md, Inside the database): each value a caller may send,
// what it is kept as, and what is refused with which message; bounds from the tier.

/** What one parameter's value becomes on `tier`: its normalized form, or the refusal's message. */
function check(name: string, value: unknown, tier: "micro" | "small" | "xlarge" = "micro"): string {
  const { parameters, violations } = mergeParameters({}, { [name]: value as never }, tier);
  if (violations.length > 0) return `! ${violations.map((v) => `${v.field}: ${v.message}`).join("; ")}`;
  return parameters[name]!;
}

describe("the allowlist", () => {
  it("has about thirty parameters, each with a type, a default and a description; units only on numbers", () => {
    expect(PARAMETERS.length).toBeGreaterThanOrEqual(30);
    for (const p of PARAMETERS) {
      expect(p.description.length, p.name).toBeGreaterThan(10);
      if (p.unit) expect(["integer", "real"]).toContain(p.type);
      if (p.type === "enum" || p.type === "list") expect(p.allowed?.length, p.name).toBeGreaterThan(0);
    }
    for (const restartOnly of ["max_connections", "shared_buffers", "shared_preload_libraries", "pg_stat_statements.max"]) {
      expect(parameterSpec(restartOnly)?.restart, restartOnly).toBe(true);
    }
    expect(parameterSpec("work_mem")?.restart).toBe(false);
  });

  const TABLE: Array<[string, unknown, string, ("micro" | "small" | "xlarge")?]> = [
    // Memory in kB, or with PostgreSQL's units (1024-based); bounded by the tier's memory.
    ["work_mem", 65536, "65536kB"],
    ["work_mem", "64MB", "65536kB"],
    ["work_mem", "1GB", "! parameters.work_mem: must be between 64 and 262144 kB on the micro tier"],
    ["work_mem", "1GB", "1048576kB", "small"],
    ["work_mem", "32", "! parameters.work_mem: must be between 64 and 262144 kB on the micro tier"],
    ["work_mem", "4 parsecs", "! parameters.work_mem: must be a number (kB, or with a unit: 64MB, 1GB)"],
    ["work_mem", 1.5, "! parameters.work_mem: must be a whole number of kB"],
    ["shared_buffers", "100kB", "! parameters.shared_buffers: must be between 128 and 419424 kB on the micro tier"],
    ["shared_buffers", "129kB", "! parameters.shared_buffers: must be a multiple of 8 kB (PostgreSQL counts it in 8 kB pages)"],
    ["shared_buffers", "256MB", "262144kB"],
    // Time in the parameter's unit, or with one.
    ["statement_timeout", "30s", "30000ms"],
    ["statement_timeout", 0, "0ms"],
    ["statement_timeout", "1.5s", "1500ms"],
    ["statement_timeout", "-5", "! parameters.statement_timeout: must be between 0 and 2147483647 ms"],
    ["log_min_duration_statement", -1, "-1"],
    ["log_min_duration_statement", "250ms", "250ms"],
    ["autovacuum_naptime", "2min", "120s"],
    ["autovacuum_naptime", "1500ms", "! parameters.autovacuum_naptime: must be a whole number of s"],
    ["idle_in_transaction_session_timeout", "1h", "3600000ms"],
    // Connections and parallelism: the tier's.
    ["max_connections", 40, "40"],
    ["max_connections", 51, "! parameters.max_connections: must be between 10 and 50 on the micro tier"],
    ["max_connections", 800, "800", "xlarge"],
    ["max_connections", "many", "! parameters.max_connections: must be a number"],
    ["max_parallel_workers_per_gather", 2, "! parameters.max_parallel_workers_per_gather: must be between 0 and 1 on the micro tier"],
    ["max_parallel_workers_per_gather", 2, "2", "small"],
    // Reals, booleans, enums, time zones, lists.
    ["random_page_cost", 1.1, "1.1"],
    ["random_page_cost", "-1", "! parameters.random_page_cost: must be between 0 and 1000"],
    ["jit", false, "off"],
    ["jit", "on", "on"],
    ["jit", "maybe", "! parameters.jit: must be true or false"],
    ["default_transaction_isolation", "SERIALIZABLE", "serializable"],
    [
      "default_transaction_isolation",
      "snapshot",
      "! parameters.default_transaction_isolation: must be one of: read uncommitted, read committed, repeatable read, serializable",
    ],
    ["timezone", "Europe/Berlin", "Europe/Berlin"],
    ["timezone", "Mars/Olympus_Mons", "! parameters.timezone: must be a time zone name such as UTC or Europe/Berlin"],
    ["timezone", "UTC'; DROP TABLE x; --", "! parameters.timezone: must be a time zone name such as UTC or Europe/Berlin"],
    ["shared_preload_libraries", ["auto_explain", "pg_stat_statements", "auto_explain"], "pg_stat_statements,auto_explain"],
    ["shared_preload_libraries", "pg_stat_statements, auto_explain", "pg_stat_statements,auto_explain"],
    [
      "shared_preload_libraries",
      ["plpython3u"],
      "! parameters.shared_preload_libraries: must be a list of: pg_stat_statements, auto_explain",
    ],
    ["pg_stat_statements.track", "all", "all"],
    // Anything else is refused by name.
    ["log_statement", "all", "! parameters.log_statement: is not a parameter that can be changed (GET …/config lists those that can)"],
    [
      "archive_command",
      "rm -rf /",
      "! parameters.archive_command: is not a parameter that can be changed (GET …/config lists those that can)",
    ],
    ["ssl", false, "! parameters.ssl: is not a parameter that can be changed (GET …/config lists those that can)"],
  ];

  for (const [name, value, want, tier] of TABLE) {
    it(`${name} = ${JSON.stringify(value)}${tier ? ` (${tier})` : ""} → ${want}`, () => {
      expect(check(name, value, tier)).toBe(want);
    });
  }

  it("is all or nothing: one refusal names each refused parameter, and keeps nothing", () => {
    const { violations } = mergeParameters({}, { work_mem: "8MB", max_connections: 9999, bogus: 1 }, "micro");
    expect(violations.map((v) => v.field)).toEqual(["parameters.max_connections", "parameters.bogus"]);
  });

  it("null removes an override; pg_stat_statements' parameters need it loaded", () => {
    expect(mergeParameters({ work_mem: "8192kB", jit: "off" }, { work_mem: null }, "micro").parameters).toEqual({ jit: "off" });
    const { violations } = mergeParameters({ "pg_stat_statements.track": "all" }, { shared_preload_libraries: ["auto_explain"] }, "micro");
    expect(violations).toEqual([
      { field: "parameters.pg_stat_statements.track", message: "needs pg_stat_statements in shared_preload_libraries" },
    ]);
  });

  it("a smaller tier refuses overrides beyond its bounds; a replica leaves out what hot standby forces and what does not fit", () => {
    const small = { max_connections: "80", work_mem: "524288kB", jit: "off" };
    expect(misfits(small, "small")).toEqual([]);
    expect(misfits(small, "micro")).toEqual([
      "max_connections is set to 80, which must be between 10 and 50 on the micro tier",
      "work_mem is set to 524288kB, which must be between 64 and 262144 kB on the micro tier",
    ]);
    expect(replicaParameters(small, "micro")).toEqual({ jit: "off" });
    expect(replicaParameters(small, "small")).toEqual({ work_mem: "524288kB", jit: "off" });
  });

  it("shows values typed: numbers in the unit (the agent's notation read too), booleans, lists", () => {
    expect(display(parameterSpec("work_mem")!, "30MB")).toBe(30720);
    expect(display(parameterSpec("statement_timeout")!, "0")).toBe(0);
    expect(display(parameterSpec("jit")!, "on")).toBe(true);
    expect(display(parameterSpec("shared_preload_libraries")!, "pg_stat_statements,auto_explain")).toEqual([
      "pg_stat_statements",
      "auto_explain",
    ]);
    expect(display(parameterSpec("random_page_cost")!, "1.1")).toBe(1.1);
  });
});
