import { readFileSync } from "node:fs";
import { mkdir, readdir, stat } from "node:fs/promises";
import path from "node:path";
import type { Isolation } from "../runtime.ts";
import { chownNoFollow, ensureOwnedDir } from "./files.ts";
import { type RunAsIdentity, runCommand } from "./run-as.ts";

/**
 * A uid/gid of its own for every server (docs/product.md, "Tenant isolation on an
 * agent host"), from AGENT_TENANT_UID_RANGE. The owner of a server's data
 * directory is the record of its user: allocated when the directory is made
 * (a create, restore or seed; a replica's data adopted by its promoted
 * database keeps it), kept with the data across agent restarts, free again
 * when the data is purged. No passwd entry is needed: PostgreSQL never looks
 * its own user up; peer authentication looks up the client's (the agent's).
 */

export const DEFAULT_TENANT_UID_RANGE: readonly [number, number] = [200_000, 299_999];

/** CAP_CHOWN, CAP_SETGID, CAP_SETUID: the bits of /proc/self/status's CapEff. */
const NEEDED_CAPS = (1n << 0n) | (1n << 6n) | (1n << 7n);

/**
 * Whether this process can give each server a user of its own: root, or a
 * process with CAP_SETUID, CAP_SETGID and CAP_CHOWN in effect. Otherwise
 * every server runs as the agent (`shared-uid`).
 */
export function isolationOf(uid = process.getuid?.() ?? -1, status?: string): Isolation {
  if (uid === 0) return "per-tenant-uid";
  let text = status;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/self/status", "utf8");
    } catch {
      return "shared-uid";
    }
  }
  const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(text);
  return m && (BigInt(`0x${m[1]}`) & NEEDED_CAPS) === NEEDED_CAPS ? "per-tenant-uid" : "shared-uid";
}

/** `200000-299999` → [200000, 299999]; the range must hold no system user (>= 1000) and fit in 32 bits. */
export function parseUidRange(raw: string): [number, number] {
  const m = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(raw);
  const lo = m ? Number(m[1]) : Number.NaN;
  const hi = m ? Number(m[2]) : Number.NaN;
  if (!m || lo < 1000 || hi < lo || hi >= 2 ** 32 - 1)
    throw new Error(`AGENT_TENANT_UID_RANGE must be <first>-<last> with 1000 <= first <= last < 4294967295, got "${raw}"`);
  return [lo, hi];
}

export interface TenantUsersOptions {
  isolation: Isolation;
  range: readonly [number, number];
  /** Where the data directories are: their owners are the uids taken. */
  instancesDir: string;
  /** The agent's identity as servers see it in the shared-uid fallback. */
  agent: RunAsIdentity;
}

const userOfUid = (uid: number, gid: number): RunAsIdentity => ({ user: `uid ${uid}`, uid, gid, switchUser: true });

export function createTenantUsers(o: TenantUsersOptions) {
  const [lo, hi] = o.range;
  const shared: RunAsIdentity = { ...o.agent, uid: process.getuid!(), gid: process.getgid!(), switchUser: false };
  /** Allocations run one at a time: a uid is taken once its directory exists. */
  let turn: Promise<unknown> = Promise.resolve();

  async function takenUids(): Promise<Set<number>> {
    const taken = new Set<number>();
    for (const name of await readdir(o.instancesDir)) {
      const st = await stat(path.join(o.instancesDir, name)).catch(() => undefined);
      if (st?.isDirectory()) taken.add(st.uid);
    }
    return taken;
  }

  async function freeUid(): Promise<number> {
    const taken = await takenUids();
    for (let uid = lo; uid <= hi; uid++) if (!taken.has(uid)) return uid;
    throw new Error(`AGENT_TENANT_UID_RANGE ${lo}-${hi} is used up: ${taken.size} data directories hold its uids`);
  }

  async function allocate(dir: string): Promise<RunAsIdentity> {
    const uid = await freeUid();
    await mkdir(dir, { mode: 0o700 });
    await chownNoFollow(dir, { uid, gid: uid });
    return userOfUid(uid, uid);
  }

  /** In the allocation turn: a free uid becomes the owner of all of `dir` and of `also`, `dir` itself last (the record). */
  async function reassign(dir: string, also: readonly string[]): Promise<RunAsIdentity> {
    const uid = await freeUid();
    const entries = (await readdir(dir)).map((n) => path.join(dir, n));
    const present: string[] = [];
    for (const p of [...entries, ...also]) if (await stat(p).catch(() => undefined)) present.push(p);
    // -h with -R (whose default is -P): a symbolic link the old shared user planted is changed itself, never followed.
    if (present.length) await runCommand("chown", ["-R", "-h", `${uid}:${uid}`, "--", ...present], { timeoutMs: 600_000 });
    await chownNoFollow(dir, { uid, gid: uid });
    return userOfUid(uid, uid);
  }

  const outsideRange = (uid: number) => uid !== 0 && (uid < lo || uid > hi);

  /**
   * Whether `dir` is a server's that must get a user of its own from the range: one from before per-server users
   * (owned by the run-as user), or one whose uid lies outside AGENT_TENANT_UID_RANGE (the range changed: the local
   * stack's agents, once all drawing on one range, now each have a range of their own, so no two agents on a machine
   * hand out the same uid).
   */
  async function needsOwnUser(dir: string): Promise<boolean> {
    if (o.isolation === "shared-uid" || !o.agent.switchUser) return false;
    const { uid } = await stat(dir);
    return uid === o.agent.uid || outsideRange(uid);
  }

  /** The user of the server whose data directory is `dir`. */
  async function userOf(dir: string): Promise<RunAsIdentity> {
    if (o.isolation === "shared-uid") return shared;
    const st = await stat(dir);
    // Data from before per-server users (owned by the run-as user) runs as that user until giveOwnUser gives it one.
    if (st.uid === o.agent.uid && o.agent.switchUser) return o.agent;
    if (st.uid === 0) throw new Error(`${dir} is owned by root: a server never runs as root`);
    // Outside the range (it changed): runs as that uid until giveOwnUser gives it one of the range at its next start.
    return userOfUid(st.uid, st.gid);
  }

  return {
    userOf,
    /** Creates `dir` (0700) owned by a fresh user of the range (shared-uid: the agent). */
    makeDir(dir: string): Promise<RunAsIdentity> {
      if (o.isolation === "shared-uid") return mkdir(dir, { mode: 0o700 }).then(() => shared);
      const next = turn.then(() => allocate(dir));
      turn = next.catch(() => {});
      return next;
    },
    needsOwnUser,
    /**
     * Gives a server from before per-server users (its data directory owned by the run-as user) or of a uid outside the range ({@link needsOwnUser})
     * a uid of the range: everything in `dir` and `also` (its WAL spool, socket directory, log; those missing are
     * skipped) is chowned to it, `dir` itself last. The owner of `dir` being the record, a crash part-way leaves the
     * directory the run-as user's and the next call does it all again. Only for a server that is not running: its
     * processes would lose their own files. Runs in the allocation turn (a create meanwhile cannot take the same uid).
     */
    giveOwnUser(dir: string, also: readonly string[]): Promise<RunAsIdentity> {
      const next = turn.then(async () => ((await needsOwnUser(dir)) ? reassign(dir, also) : userOf(dir)));
      turn = next.catch(() => {});
      return next;
    },
    /** `dir` exists, mode 0700, owned by `user` (created, or given to it: a uid carried over by an adoption). */
    async ensureOwnedDir(dir: string, user: RunAsIdentity): Promise<void> {
      // On an O_NOFOLLOW descriptor (files.ts): a link in its place is refused, never chowned through.
      await ensureOwnedDir(dir, user);
    },
  };
}
