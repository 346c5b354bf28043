/**
 * Backups and point-in-time restore through the gateway (docs/product.md, Backups
 * and point-in-time restore): how ListBackups, CreateBackup and RestoreToTime
 * map onto the public JSON, which upstream refusals become which statuses, and
 * restored_from on the records of a restored database. Every response is
 * checked against the OpenAPI document by `api()`.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { BackupSchema, BackupStatus, BackupType } from "@dbaas/proto/databases";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedBackups, WINDOW } from "./support/backups-stub.ts";
import { api, startGateway, type TestGateway } from "./support/gateway.ts";
import { ALL_PERMISSIONS, principal, startStubs, type Stubs } from "./support/stubs.ts";

let stubs: Stubs;
let gw: TestGateway;
const TOKEN = "tok-backups";
const OTHER = "tok-backups-other-org";
let source: string;

const post = (path: string, body?: unknown, headers?: Record<string, string>) =>
  api(gw.url, path, { method: "POST", token: TOKEN, body: body ?? {}, headers });
const get = (path: string, token = TOKEN) => api(gw.url, path, { token });
const seen = (rpc: string) => stubs.state.seen.get(rpc) ?? [];

async function newDatabase(name: string, status = "running"): Promise<string> {
  const res = await post("/v1/databases", { name, region: "fsn1", tier: "micro" });
  expect(res.status).toBe(201);
  stubs.state.databases.get(res.body.data.id)!.db.status = status;
  return res.body.data.id;
}

beforeAll(async () => {
  stubs = await startStubs();
  stubs.state.tokens.set(TOKEN, principal({ org: "org-backups", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  stubs.state.tokens.set(OTHER, principal({ org: "org-elsewhere", permissions: ALL_PERMISSIONS, plan: "enterprise" }));
  gw = await startGateway(stubs);
  source = await newDatabase("source");
});

afterAll(async () => {
  await gw?.close();
  await stubs?.close();
});

describe("GET /v1/databases/{id}/backups", () => {
  it("before any backup: an empty list, no window, archiving healthy", async () => {
    const id = await newDatabase("fresh", "provisioning");
    const res = await get(`/v1/databases/${id}/backups`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      backups: [],
      earliest_restore_time: null,
      latest_restore_time: null,
      wal_archiving: { status: "healthy", error: null },
    });
    expect(res.body.meta).toEqual({ request_id: expect.any(String), page: 1, per_page: 20, total: 0, total_pages: 0 });
  });

  it("maps every field: types, statuses, times, sizes as numbers, why a backup or the archive failed", async () => {
    const id = await newDatabase("mapped");
    seedBackups(stubs.state, id);
    const held = stubs.state.backups.get(id)!;
    // Newest first, as the service lists them.
    held.backups.unshift(
      create(BackupSchema, {
        id: "bkp-running1",
        databaseId: id,
        type: BackupType.MANUAL,
        status: BackupStatus.RUNNING,
        startedAt: timestampFromDate(new Date("2025-03-01T11:45:00Z")),
      }),
      create(BackupSchema, {
        id: "bkp-failed1",
        databaseId: id,
        type: BackupType.MANUAL,
        status: BackupStatus.FAILED,
        startedAt: timestampFromDate(new Date("2025-03-01T11:30:00Z")),
        completedAt: timestampFromDate(new Date("2025-03-01T11:31:00Z")),
        failureReason: "the agent restarted during the backup",
      }),
    );
    held.archiveError = "backup store unreachable: connect ECONNREFUSED";
    const res = await get(`/v1/databases/${id}/backups`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      backups: [
        {
          id: "bkp-running1",
          type: "manual",
          status: "running",
          started_at: "2025-03-01T11:45:00.000Z",
          completed_at: null,
          size_bytes: 0,
          failure_reason: null,
        },
        {
          id: "bkp-failed1",
          type: "manual",
          status: "failed",
          started_at: "2025-03-01T11:30:00.000Z",
          completed_at: "2025-03-01T11:31:00.000Z",
          size_bytes: 0,
          failure_reason: "the agent restarted during the backup",
        },
        {
          id: `bkp-seed${id.slice(3)}`,
          type: "scheduled",
          status: "completed",
          started_at: "2025-03-01T11:00:00.000Z",
          completed_at: "2025-03-01T11:00:42.000Z",
          size_bytes: 5_242_880,
          failure_reason: null,
        },
      ],
      earliest_restore_time: "2025-03-01T11:00:00.000Z",
      latest_restore_time: "2025-03-01T12:00:00.000Z",
      wal_archiving: { status: "failing", error: "backup store unreachable: connect ECONNREFUSED" },
    });
    expect(res.body.meta).toMatchObject({ total: 3, total_pages: 1 });
  });

  it("pages like every list: bounds checked here, the page passed on", async () => {
    const res = await get(`/v1/databases/${source}/backups?per_page=1&page=2`);
    expect(res.status).toBe(200);
    expect(seen("listBackups").at(-1)).toMatchObject({ organizationId: "org-backups", databaseId: source, page: 2, perPage: 1 });
    const before = seen("listBackups").length;
    const tooMany = await get(`/v1/databases/${source}/backups?per_page=101`);
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.details).toEqual([{ field: "per_page", message: "must be between 1 and 100" }]);
    expect((await get(`/v1/databases/${source}/backups?page=abc`)).status).toBe(400);
    expect(seen("listBackups")).toHaveLength(before);
  });

  it("another organization's database is 404", async () => {
    const res = await get(`/v1/databases/${source}/backups`, OTHER);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("resource_not_found");
  });
});

describe("POST /v1/databases/{id}/backups", () => {
  it("a database that is not running is 409 with the service's reason", async () => {
    const id = await newDatabase("stopped-one", "stopped");
    const res = await post(`/v1/databases/${id}/backups`);
    expect(res.status).toBe(409);
    expect(res.body.error).toEqual({ code: "resource_conflict", message: "cannot back up a database that is stopped", details: [] });
  });

  it("202 with the backup record, running; a second while it runs is 409", async () => {
    const id = await newDatabase("backed-up");
    const res = await post(`/v1/databases/${id}/backups`);
    expect(res.status).toBe(202);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^bkp-/),
      type: "manual",
      status: "running",
      started_at: "2025-03-01T10:00:00.000Z",
      completed_at: null,
      size_bytes: 0,
      failure_reason: null,
    });
    expect(seen("createBackup").at(-1)).toMatchObject({ organizationId: "org-backups", databaseId: id });
    const again = await post(`/v1/databases/${id}/backups`);
    expect(again.status).toBe(409);
    expect(again.body.error.message).toBe("a backup is already running");
  });

  it("with an Idempotency-Key a retry gets the first answer, and one backup is asked for", async () => {
    const id = await newDatabase("idempotent");
    const headers = { "idempotency-key": `backup-${id}` };
    const first = await post(`/v1/databases/${id}/backups`, {}, headers);
    const retry = await post(`/v1/databases/${id}/backups`, {}, headers);
    expect(first.status).toBe(202);
    expect(retry.status).toBe(202);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body.data).toEqual(first.body.data);
    expect(seen("createBackup").filter((r) => (r as { databaseId: string }).databaseId === id)).toHaveLength(1);
  });

  it("the operations log shows backups, restores and WAL archiving", async () => {
    const id = await newDatabase("logged");
    await post(`/v1/databases/${id}/backups`);
    const { startedAt } = stubs.state.operations.get(id)![0]!;
    stubs.state.operations
      .get(id)!
      .push(
        { id: "op-wal1", databaseId: id, type: "wal_archive", status: "failed", startedAt, finishedAt: startedAt, error: "spool full" },
        { id: "op-rst1", databaseId: id, type: "restore", status: "succeeded", startedAt, finishedAt: startedAt },
      );
    const res = await get(`/v1/databases/${id}/operations`);
    expect(res.status).toBe(200);
    expect(res.body.data.operations.slice(2)).toEqual([
      { id: "op-backup1", type: "backup", status: "running", started_at: "2025-03-01T10:00:00.000Z", finished_at: null, error: null },
      {
        id: "op-wal1",
        type: "wal_archive",
        status: "failed",
        started_at: "2025-03-01T10:00:00.000Z",
        finished_at: "2025-03-01T10:00:00.000Z",
        error: "spool full",
      },
      {
        id: "op-rst1",
        type: "restore",
        status: "succeeded",
        started_at: "2025-03-01T10:00:00.000Z",
        finished_at: "2025-03-01T10:00:00.000Z",
        error: null,
      },
    ]);
  });
});

describe("POST /v1/databases/{id}/restore", () => {
  beforeAll(() => seedBackups(stubs.state, source));

  it("201: exactly what create answers, plus restored_from (default: the latest instant, the source's tier and region)", async () => {
    const res = await post(`/v1/databases/${source}/restore`, { name: "restored" });
    expect(res.status).toBe(201);
    const id = res.body.data.id;
    expect(id).not.toBe(source);
    expect(res.body.data).toEqual({
      id,
      name: "restored",
      type: "postgres",
      region: "fsn1",
      tier: "micro",
      version: "17",
      status: "provisioning",
      host: `${id}.db.example.test`,
      port: 5432,
      database: "defaultdb",
      username: "dbadmin",
      password: "s3cret-password-of-24-chars",
      connection_string: `postgresql://dbadmin:s3cret-password-of-24-chars@${id}.db.example.test:5432/defaultdb?sslmode=require`,
      created_at: "2025-03-01T10:00:00.000Z",
      restored_from: { database_id: source, restore_time: "2025-03-01T12:00:00.000Z" },
    });
    const sent = seen("restoreToTime").at(-1) as Record<string, unknown>;
    expect(sent).toMatchObject({ organizationId: "org-backups", sourceDatabaseId: source, name: "restored", tier: "", region: "" });
    expect(sent.restoreTime).toBeUndefined();
  });

  it("passes restore_time to the nanosecond, in UTC, and the tier and region asked for", async () => {
    const res = await post(`/v1/databases/${source}/restore`, {
      name: "restored-at",
      restore_time: "2025-03-01T12:30:00.123456789+01:00",
      tier: "small",
      region: "hel1",
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ tier: "small", region: "hel1" });
    expect(res.body.data.restored_from).toEqual({ database_id: source, restore_time: "2025-03-01T11:30:00.123Z" });
    const sent = seen("restoreToTime").at(-1) as { restoreTime: { seconds: bigint; nanos: number } };
    expect(sent.restoreTime.seconds).toBe(BigInt(Date.parse("2025-03-01T11:30:00Z") / 1000));
    expect(sent.restoreTime.nanos).toBe(123_456_789);
  });

  it("outside the window is 422 naming restore_time and the window", async () => {
    const res = await post(`/v1/databases/${source}/restore`, { name: "too-early", restore_time: "2025-03-01T10:59:59Z" });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("validation_error");
    expect(res.body.error.details).toEqual([
      {
        field: "restore_time",
        message: `must be within the restore window, ${WINDOW.earliest.toISOString()} to ${WINDOW.latest.toISOString()}`,
      },
    ]);
  });

  it("as create: 402 beyond the free allowance, 409 for a name in use", async () => {
    const payment = await post(`/v1/databases/${source}/restore`, { name: "big-one", tier: "large" });
    expect(payment.status).toBe(402);
    expect(payment.body.error.code).toBe("payment_required");
    const taken = await post(`/v1/databases/${source}/restore`, { name: "source" });
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe("resource_conflict");
  });

  it("a database without a completed backup is 409", async () => {
    const id = await newDatabase("no-backup-yet");
    const res = await post(`/v1/databases/${id}/restore`, { name: "from-nothing" });
    expect(res.status).toBe(409);
    expect(res.body.error.message).toBe("no completed backup yet");
  });

  it("another organization's database is 404", async () => {
    const res = await api(gw.url, `/v1/databases/${source}/restore`, { method: "POST", token: OTHER, body: { name: "stolen" } });
    expect(res.status).toBe(404);
  });
});

describe("restored_from on the records of a restored database", () => {
  it("GET shows it on the restored database, and not on others", async () => {
    const restored = (await post(`/v1/databases/${source}/restore`, { name: "shown" })).body.data.id;
    const from = { database_id: source, restore_time: "2025-03-01T12:00:00.000Z" };
    expect((await get(`/v1/databases/${restored}`)).body.data.restored_from).toEqual(from);
    expect(Object.keys((await get(`/v1/databases/${source}`)).body.data)).not.toContain("restored_from");
  });

  it("a list item carries only the spec's seven fields (2.1), a restored database's too", async () => {
    const restored = (await post(`/v1/databases/${source}/restore`, { name: "listed" })).body.data.id;
    const items: Array<{ id: string }> = (await get("/v1/databases?per_page=100")).body.data.databases;
    const spec = ["created_at", "id", "name", "region", "status", "tier", "version"];
    expect(Object.keys(items.find((d) => d.id === restored)!).sort()).toEqual(spec);
    expect(Object.keys(items.find((d) => d.id === source)!).sort()).toEqual(spec);
  });
});
