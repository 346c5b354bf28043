/**
 * What the backup end-to-end tests share: waiting for statuses and backups, and
 * the point-in-time round trip (batches committed around an instant, a restore
 * to it checked row by row).
 */
import { expect } from "vitest";
import { type createApi, waitFor } from "./api.ts";
import { query } from "./pgclient.ts";

export type Api = ReturnType<typeof createApi>;

/**
 * waitFor at about one request a second: an organization on the free plan may make 60 a minute, and a 429 in
 * a poll would only be retried into more 429s.
 */
export async function poll<T>(fn: () => Promise<T | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const pause = () => new Promise((r) => setTimeout(r, 1000));
  return await waitFor(
    async () => {
      try {
        const v = await fn();
        if (!v) await pause();
        return v;
      } catch (err) {
        await pause();
        throw err;
      }
    },
    timeoutMs,
    what,
  );
}

interface BackupJson {
  id: string;
  type: string;
  status: string;
  started_at: string;
  completed_at: string | null;
  size_bytes: number;
  failure_reason: string | null;
}

/**
 * Waits for `status`. A failed database is waited through (its agent retries on, and a later success makes it
 * running); if the wait times out, the error names its last status and failed operations.
 */
export async function waitRunning(api: Api, id: string, status = "running", timeoutMs = 90_000): Promise<void> {
  let seen: string | undefined;
  try {
    await poll(
      async () => {
        seen = (await api.get(`/v1/databases/${id}`)).body.data?.status;
        return seen === status;
      },
      timeoutMs,
      `${id} ${status}`,
    );
  } catch (err) {
    const ops = (await api.get(`/v1/databases/${id}/operations?per_page=100`).catch(() => undefined))?.body.data?.operations ?? [];
    const failed = ops.filter((o: { status: string }) => o.status === "failed");
    throw new Error(`${(err as Error).message} (last status ${seen}; failed operations: ${JSON.stringify(failed)})`);
  }
}

export async function backupsOf(api: Api, id: string) {
  const res = await api.get(`/v1/databases/${id}/backups?per_page=100`);
  expect(res.status).toBe(200);
  return res.body.data as {
    backups: BackupJson[];
    earliest_restore_time: string | null;
    latest_restore_time: string | null;
    wal_archiving: { status: string; error: string | null };
  };
}

/** The first completed backup (a database gets one as soon as it first runs). */
export async function waitFirstBackup(api: Api, id: string, timeoutMs = 120_000): Promise<BackupJson> {
  return await poll(async () => (await backupsOf(api, id)).backups.find((b) => b.status === "completed"), timeoutMs, `${id}: a backup`);
}

/** Asks for a manual backup, retrying while another one still runs. */
export async function takeBackup(api: Api, id: string): Promise<BackupJson> {
  return await poll(
    async () => {
      const res = await api.post(`/v1/databases/${id}/backups`);
      if (res.status === 409) return undefined;
      expect(res.status).toBe(202);
      return res.body.data as BackupJson;
    },
    60_000,
    `${id}: a manual backup accepted`,
  );
}

/** The stack log's lines about any of `ids`, and its agents' and the databases service's warnings: the last `n`. */
export function logAbout(log: string, ids: readonly string[], n = 60): string {
  return log
    .split("\n")
    .filter((l) => !/^gateway\s+\| request /.test(l))
    .filter((l) => ids.some((id) => l.includes(id)) || /^(databases|agent-\S+)\s+\| (WARN|ERROR|exited)/.test(l))
    .slice(-n)
    .join("\n");
}

/**
 * Waits until no backup of `id` runs any more; returns the list. On timeout the error names the backups
 * still listed and, given the stack's `log`, its lines about the database.
 */
export async function waitBackupsSettled(api: Api, id: string, timeoutMs = 120_000, log?: () => string): Promise<BackupJson[]> {
  let last: BackupJson[] = [];
  try {
    return await poll(
      async () => {
        last = (await backupsOf(api, id)).backups;
        return last.every((b) => b.status !== "running") && last;
      },
      timeoutMs,
      `${id}: backups settled`,
    );
  } catch (err) {
    const listed = last.map((b) => `${b.id} ${b.type} ${b.status}${b.failure_reason ? ` (${b.failure_reason})` : ""}`).join(", ");
    throw new Error(`${(err as Error).message}; listed: ${listed}${log ? `\nstack log about it:\n${logAbout(log(), [id])}` : ""}`);
  }
}

/** Until the window's latest instant has passed `instant`. */
export async function waitRestorableThrough(api: Api, id: string, instant: Date, timeoutMs = 120_000): Promise<void> {
  await poll(
    async () => {
      const latest = (await backupsOf(api, id)).latest_restore_time;
      return latest !== null && Date.parse(latest) >= instant.getTime();
    },
    timeoutMs,
    `${id}: restorable through ${instant.toISOString()}`,
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function rowsOf(connectionString: string): Promise<number[]> {
  return (await query(connectionString, "SELECT n FROM batches ORDER BY n")).map((r: { n: number }) => r.n);
}

/**
 * Creates a database, commits batch 1 (rows 1–20, one transaction each), notes
 * the instant T, commits batch 2 (rows 21–40), then restores to T and to the
 * latest instant: the first restore holds exactly batch 1, the second both.
 * Each restored database is new: its own id, host and password; the source's
 * password does not open it.
 */
export async function pitrRoundTrip(api: Api, opts: { name: string; version: string; region?: string; restoreRegion?: string }) {
  const created = await api.post("/v1/databases", { name: opts.name, region: opts.region ?? "fsn1", tier: "micro", version: opts.version });
  expect(created.status).toBe(201);
  const source = created.body.data;
  await waitRunning(api, source.id);
  await waitFirstBackup(api, source.id);

  const cs = source.connection_string as string;
  await query(cs, "CREATE TABLE batches (n int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())");
  for (let n = 1; n <= 20; n++) await query(cs, `INSERT INTO batches (n) VALUES (${n})`);
  await sleep(1200);
  const target = new Date();
  await sleep(1200);
  for (let n = 21; n <= 40; n++) await query(cs, `INSERT INTO batches (n) VALUES (${n})`);
  const afterAll = new Date();
  await waitRestorableThrough(api, source.id, afterAll);

  const toTarget = await api.post(`/v1/databases/${source.id}/restore`, {
    name: `${opts.name}-at-t`,
    restore_time: target.toISOString(),
    ...(opts.restoreRegion && { region: opts.restoreRegion }),
  });
  expect(toTarget.status).toBe(201);
  const atTarget = toTarget.body.data;
  expect(atTarget.restored_from).toEqual({ database_id: source.id, restore_time: target.toISOString() });
  expect(atTarget.id).not.toBe(source.id);
  expect(atTarget.host).not.toBe(source.host);
  expect(atTarget.password).not.toBe(source.password);
  expect(atTarget.version).toBe(opts.version);

  const toLatest = await api.post(`/v1/databases/${source.id}/restore`, { name: `${opts.name}-latest` });
  expect(toLatest.status).toBe(201);
  const latest = toLatest.body.data;

  // One after the other (both restores run meanwhile): polls stay within the organization's request budget.
  await waitRunning(api, atTarget.id, "running", 180_000);
  await waitRunning(api, latest.id, "running", 180_000);
  expect(await rowsOf(atTarget.connection_string)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  expect(await rowsOf(latest.connection_string)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  // The restored database's own password, not the source's.
  const withSourcePassword = (atTarget.connection_string as string).replace(
    encodeURIComponent(atTarget.password),
    encodeURIComponent(source.password),
  );
  await expect(query(withSourcePassword, "SELECT 1")).rejects.toThrow(/password/);
  // And the source is untouched: both batches, still writable.
  expect(await rowsOf(cs)).toHaveLength(40);
  return { source, atTarget, latest };
}
