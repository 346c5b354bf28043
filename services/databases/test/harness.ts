import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { internalCredentialInterceptor, migrate, requireInternalAuth, type Logger } from "@dbaas/kit";
import { AgentService, BackupState, ObservedState, type InstanceSpec, type WatchAssignmentsResponse } from "@dbaas/proto/agent";
import { BillingService, type StatusEvent } from "@dbaas/proto/billing";
import { FieldViolationSchema } from "@dbaas/proto/common";
import { DatabasesService, type CreateDatabaseResponse } from "@dbaas/proto/databases";
import { createTestDatabase, type TestDatabase } from "@dbaas/test/support/pg";
import { expect } from "vitest";
import type { ChangeFeed } from "../src/change-feed.ts";
import { readConfig } from "../src/config.ts";
import { createContext, type AppContext } from "../src/context.ts";
import { MIGRATIONS_DIR } from "../src/db/schema.ts";
import { routes } from "../src/routes.ts";

export const SECRET = "databases-test-secret";
export const DOMAIN = "db.test";
export const CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n";

/** A billing service stand-in that records every batch it acknowledged and can be made to fail. */
export interface FakeBilling {
  client: Client<typeof BillingService>;
  /** Batches billing acknowledged, in arrival order. */
  batches: StatusEvent[][];
  /** Every call that reached billing, acknowledged or not. */
  calls: number;
  /** While set, RecordStatusEvents fails with this error (billing never records the batch). */
  failure: ConnectError | undefined;
  /** Awaited inside RecordStatusEvents before answering, to hold a batch in flight. */
  gate: Promise<void> | undefined;
  /** Organizations without a default payment method (every other one has one). */
  withoutPaymentMethod: Set<string>;
  /** Organizations with an unpaid past-due invoice. */
  withPastDueInvoice: Set<string>;
  /** GetStanding calls, by organization. */
  standingAsked: string[];
  /** While set, GetStanding fails with this error. */
  standingFailure: ConnectError | undefined;
  delivered(): StatusEvent[];
}

export function createFakeBilling(): FakeBilling {
  const fake: FakeBilling = {
    client: undefined as unknown as Client<typeof BillingService>,
    batches: [],
    calls: 0,
    failure: undefined,
    gate: undefined,
    withoutPaymentMethod: new Set(),
    withPastDueInvoice: new Set(),
    standingAsked: [],
    standingFailure: undefined,
    delivered: () => fake.batches.flat(),
  };
  const transport = createRouterTransport((router) =>
    router.service(BillingService, {
      async recordStatusEvents(req) {
        fake.calls++;
        if (fake.gate) await fake.gate;
        if (fake.failure) throw fake.failure;
        fake.batches.push(req.events);
        return { recorded: req.events.length };
      },
      async getStanding(req) {
        fake.standingAsked.push(req.organizationId);
        if (fake.standingFailure) throw fake.standingFailure;
        return {
          hasDefaultPaymentMethod: !fake.withoutPaymentMethod.has(req.organizationId),
          hasPastDueInvoice: fake.withPastDueInvoice.has(req.organizationId),
        };
      },
    }),
  );
  fake.client = createClient(BillingService, transport);
  return fake;
}

/** A logger keeping every line it was given, so tests can prove secrets never reach it. */
export function createCapturingLogger(lines: string[] = []): Logger & { lines: string[] } {
  const make = (base: Record<string, unknown>): Logger => {
    const write = (level: string) => (msg: string, fields?: Record<string, unknown>) => {
      lines.push(JSON.stringify({ level, msg, ...base, ...fields }, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)));
    };
    return { info: write("info"), warn: write("warn"), error: write("error"), child: (f) => make({ ...base, ...f }) };
  };
  return Object.assign(make({}), { lines });
}

export interface Harness {
  ctx: AppContext;
  billing: FakeBilling;
  logs: string[];
  dbs: Client<typeof DatabasesService>;
  agents: Client<typeof AgentService>;
  /** A DatabasesService client whose calls arrive as internal caller `caller`. */
  dbsAs(caller: string): Client<typeof DatabasesService>;
  /** A DatabasesService client over a context whose settings differ from the harness's. */
  dbsWith(cfg: Partial<AppContext["cfg"]>): Client<typeof DatabasesService>;
  /** An AgentService client over the harness's context with some dependencies swapped. */
  agentsWith(overrides: Partial<AppContext>): Client<typeof AgentService>;
  pgdb: TestDatabase;
  close(): Promise<void>;
}

/** A fresh database with the databases schema migrated, a real change feed, and clients calling the handlers in process. */
export async function createHarness(env: Record<string, string> = {}): Promise<Harness> {
  const pgdb = await createTestDatabase("databases");
  const cfg = readConfig({
    DATABASE_URL: pgdb.url,
    INTERNAL_AUTH_SECRET: SECRET,
    BILLING_URL: "http://127.0.0.1:1",
    IDENTITY_URL: "http://127.0.0.1:1",
    DATABASE_DOMAIN: DOMAIN,
    PASSWORD_APPLY_TIMEOUT_MS: "5000",
    ...env,
  });
  const billing = createFakeBilling();
  const log = createCapturingLogger();
  const ctx = await createContext(cfg, { billing: billing.client, log });
  await migrate(ctx.pool, cfg.schema, MIGRATIONS_DIR);
  const transport = createRouterTransport(routes(ctx));
  return {
    ctx,
    billing,
    logs: log.lines,
    pgdb,
    dbs: createClient(DatabasesService, transport),
    agents: createClient(AgentService, transport),
    dbsAs(caller) {
      // The real internal-auth pair: the client signs as `caller`, the router verifies and records it.
      return createClient(
        DatabasesService,
        createRouterTransport(routes(ctx), {
          router: { interceptors: [requireInternalAuth(SECRET)] },
          transport: { interceptors: [internalCredentialInterceptor(SECRET, caller)] },
        }),
      );
    },
    dbsWith(overrides) {
      return createClient(DatabasesService, createRouterTransport(routes({ ...ctx, cfg: { ...cfg, ...overrides } })));
    },
    agentsWith(overrides) {
      return createClient(AgentService, createRouterTransport(routes({ ...ctx, ...overrides })));
    },
    async close() {
      await ctx.feed.close();
      await ctx.pool.end();
      await pgdb.drop();
    },
  };
}

/** The harness's change feed, counting the subscriptions still held, to catch handlers that never let go. */
export function countingFeed(feed: ChangeFeed): { feed: ChangeFeed; active(): number } {
  let active = 0;
  const track = (off: () => void) => {
    active++;
    let done = false;
    return () => {
      if (!done) active--;
      done = true;
      off();
    };
  };
  return {
    feed: {
      onAgent: (id, fn) => track(feed.onAgent(id, fn)),
      onDatabase: (id, fn) => track(feed.onDatabase(id, fn)),
      close: () => feed.close(),
    },
    active: () => active,
  };
}

/** Empties every table, for files whose tests must not see each other's agents. */
export async function resetTables(h: Harness): Promise<void> {
  await h.ctx.pool.query(
    "TRUNCATE agents, databases, operations, outbox, backups, restore_windows, samples, sample_minutes, sample_rollups, replica_lags, ha_leases, ha_discards, database_roles, database_config RESTART IDENTITY",
  );
}

export interface AgentOptions {
  regions?: string[];
  capacity?: number;
  ports?: [number, number];
  versions?: string[];
  /** AGENT_PUBLIC_ADDRESS as the agent registers it (default 127.0.0.1). */
  addresses?: string[];
}

export async function registerAgent(h: Harness, agentId: string, o: AgentOptions = {}): Promise<string> {
  await h.agents.registerAgent({
    agentId,
    regions: o.regions ?? ["fsn1"],
    capacity: o.capacity ?? 10,
    portRangeStart: o.ports?.[0] ?? 20000,
    portRangeEnd: o.ports?.[1] ?? 20999,
    versions: o.versions ?? ["17"],
    caCertificatePem: CA_PEM,
    publicAddresses: o.addresses ?? ["127.0.0.1"],
  });
  return agentId;
}

/** The first message of the agent's watch stream (the snapshot), then the stream is closed. */
export async function snapshot(h: Harness, agentId: string): Promise<WatchAssignmentsResponse> {
  const abort = new AbortController();
  try {
    for await (const msg of h.agents.watchAssignments({ agentId }, { signal: abort.signal })) {
      return msg;
    }
    throw new Error("watch stream ended without a message");
  } finally {
    abort.abort();
  }
}

export async function specOf(h: Harness, agentId: string, databaseId: string): Promise<InstanceSpec | undefined> {
  return (await snapshot(h, agentId)).instances.find((i) => i.databaseId === databaseId);
}

export interface Observation {
  /** Defaults to the generation of the spec the agent currently has. */
  generation?: bigint;
  /** Defaults to the credentials generation of the spec the agent currently has. */
  credentials?: bigint;
  message?: string;
}

/** Plays the agent: reads its current spec for the database and reports `state` for it. */
export async function report(h: Harness, agentId: string, databaseId: string, state: ObservedState, o: Observation = {}): Promise<void> {
  const spec = o.generation === undefined || o.credentials === undefined ? await specOf(h, agentId, databaseId) : undefined;
  await h.agents.reportInstances({
    agentId,
    instances: [
      {
        databaseId,
        state,
        observedGeneration: o.generation ?? spec!.generation,
        appliedCredentialsGeneration: o.credentials ?? spec!.credentialsGeneration,
        message: o.message ?? "",
      },
    ],
  });
}

/** One backup's news as a test's agent sends it. */
export interface BackupNews {
  id: string;
  state: BackupState;
  startedAt?: Date;
  completedAt?: Date;
  sizeBytes?: bigint;
  message?: string;
}

/** Plays the agent's backup report for one database: backup news, the restore window, archiving health. */
export async function reportBackups(
  h: Harness,
  agentId: string,
  databaseId: string,
  o: { backups?: BackupNews[]; window?: [Date, Date]; archiveError?: string; spoolBytes?: bigint } = {},
): Promise<void> {
  await h.agents.reportBackups({
    agentId,
    databases: [
      {
        databaseId,
        backups: (o.backups ?? []).map((b) => ({
          backupId: b.id,
          state: b.state,
          startedAt: b.startedAt && timestampFromDate(b.startedAt),
          completedAt: b.completedAt && timestampFromDate(b.completedAt),
          sizeBytes: b.sizeBytes ?? 0n,
          message: b.message ?? "",
        })),
        earliestRestoreTime: o.window && timestampFromDate(o.window[0]),
        latestRestoreTime: o.window && timestampFromDate(o.window[1]),
        archiveError: o.archiveError ?? "",
        spoolBytes: o.spoolBytes ?? 0n,
      },
    ],
  });
}

/** The agent reports backup `id` of the database completed, with `window` as its restore window. */
export async function completeBackup(h: Harness, agentId: string, databaseId: string, id: string, window?: [Date, Date]): Promise<void> {
  await reportBackups(h, agentId, databaseId, {
    backups: [{ id, state: BackupState.COMPLETED, completedAt: new Date(), sizeBytes: 1234n }],
    window,
  });
}

let nameSeq = 0;
export const uniqueName = (prefix = "db") => `${prefix}-${++nameSeq}-${Math.random().toString(36).slice(2, 7)}`;

export async function createDb(
  h: Harness,
  org: string,
  o: { name?: string; region?: string; tier?: string; version?: string } = {},
): Promise<CreateDatabaseResponse> {
  return await h.dbs.createDatabase({
    organizationId: org,
    name: o.name ?? uniqueName(),
    region: o.region ?? "fsn1",
    tier: o.tier ?? "micro",
    version: o.version ?? "",
  });
}

/** A database its agent has reported running. */
export async function runningDb(h: Harness, org: string, agentId: string, o: Parameters<typeof createDb>[2] = {}) {
  const created = await createDb(h, org, o);
  await report(h, agentId, created.database!.id, ObservedState.RUNNING);
  return created;
}

export async function statusOf(h: Harness, org: string, id: string): Promise<string> {
  return (await h.dbs.getDatabase({ organizationId: org, id })).database!.status;
}

/** The error a call failed with; fails the test when it succeeded. */
export async function rejection(p: Promise<unknown>): Promise<ConnectError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "call should have failed").toBeDefined();
  return ConnectError.from(err);
}

/** Asserts the call failed with `code` and returns the error. */
export async function expectCode(p: Promise<unknown>, code: Code): Promise<ConnectError> {
  const err = await rejection(p);
  expect(Code[err.code], err.rawMessage).toBe(Code[code]);
  return err;
}

export function violationsOf(err: ConnectError): { field: string; message: string }[] {
  return err.findDetails(FieldViolationSchema).map((v) => ({ field: v.field, message: v.message }));
}

/** Polls `fn` until it returns a truthy value or `ms` elapse. */
export async function eventually<T>(fn: () => Promise<T | undefined | false>, ms = 2000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
