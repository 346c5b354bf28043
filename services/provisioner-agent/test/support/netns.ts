import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import type { ChildAnswer, ChildRequest } from "./netns-replica-child.ts";

// Network namespaces joined to this one by a veth pair: another host, as far
// as networking goes (its own loopback and ports, reaching this host only over
// the veth), on the same filesystem. For tests of what crosses a network
// between agents (replicas/netns-replica.test.ts). Root only.

const here = path.dirname(fileURLToPath(import.meta.url));
/** Namespaces are `dbaas-rep-<pid>[-<suffix>]`, root-side veths `drp<pid><letter>`: the pid says whose they are. */
const NS_RE = /^dbaas-rep-(\d+)(?:-[a-z0-9]+)?$/;
const LINK_RE = /^drp(\d+)[a-z]$/;

const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" });

/** Why network namespaces cannot be used here (not root, or `ip netns add` fails), or undefined when they can. */
export function netnsUnusable(): string | undefined {
  if (process.getuid?.() !== 0) return "not root: network namespaces need CAP_SYS_ADMIN";
  const probe = `dbaas-rep-${process.pid}-probe`;
  try {
    ip("netns", "add", probe);
  } catch (e) {
    return `ip netns add failed: ${((e as { stderr?: string }).stderr ?? (e as Error).message).trim()}`;
  } finally {
    try {
      ip("netns", "del", probe);
    } catch {
      // never created
    }
  }
  return undefined;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** Ends the processes left in namespace `ns` (this test's servers, by construction) and deletes it. */
function removeNamespace(ns: string): void {
  try {
    for (const pid of ip("netns", "pids", ns).split("\n").filter(Boolean)) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        // gone already
      }
    }
    ip("netns", "del", ns);
  } catch {
    // gone already
  }
}

/** Removes the namespaces and veths of earlier runs whose process is gone (a killed run leaves them). */
export function removeLeftovers(): void {
  for (const line of ip("netns", "list").split("\n")) {
    const name = line.split(" ")[0]!;
    const m = NS_RE.exec(name);
    if (m && !alive(Number(m[1]))) removeNamespace(name);
  }
  for (const line of ip("-o", "link", "show").split("\n")) {
    const name = /^\d+:\s+([^@:]+)/.exec(line)?.[1];
    const m = name ? LINK_RE.exec(name) : null;
    if (m && !alive(Number(m[1]))) {
      try {
        ip("link", "del", name!);
      } catch {
        // gone with its namespace
      }
    }
  }
}

/** A namespace and the /30 joining it to this one. */
export interface Netns {
  readonly name: string;
  /** This side's address and the namespace side's, and the /30 they share. */
  readonly rootAddress: string;
  readonly nsAddress: string;
  readonly network: string;
  /** Deletes the veth and the namespace, ending any process left in it. Never throws. */
  remove(): void;
}

/**
 * Namespace `dbaas-rep-<pid>-<suffix>` with loopback up and a veth pair:
 * `10.<a>.<b>.<c+1>/30` here, `.<c+2>/30` there, the namespace's default
 * route through this side (so it reaches this host's other addresses too).
 * `slot` (0 or 1) picks one of this process's two /30s.
 */
export function createNetns(suffix: string, slot: number): Netns {
  const pid = process.pid;
  const name = `dbaas-rep-${pid}-${suffix}`;
  const link = `drp${pid}${String.fromCharCode(97 + slot)}`;
  const peer = `drq${pid}${String.fromCharCode(97 + slot)}`;
  if (slot !== 0 && slot !== 1) throw new Error("slot is 0 or 1");
  // /30s in 10.200.0.0-10.249.255.255: distinct for distinct pids (22 bits) and the two slots.
  const a = 200 + ((pid >> 14) % 25) + 25 * slot;
  const b = (pid >> 6) & 255;
  const c = (pid & 63) * 4;
  const base = `10.${a}.${b}`;
  const rootAddress = `${base}.${c + 1}`;
  const nsAddress = `${base}.${c + 2}`;
  const remove = () => {
    try {
      ip("link", "del", link);
    } catch {
      // gone with its namespace, or never made
    }
    removeNamespace(name);
  };
  try {
    ip("netns", "add", name);
    ip("link", "add", link, "type", "veth", "peer", "name", peer);
    ip("link", "set", peer, "netns", name);
    ip("addr", "add", `${rootAddress}/30`, "dev", link);
    ip("link", "set", link, "up");
    ip("-n", name, "link", "set", "lo", "up");
    ip("-n", name, "addr", "add", `${nsAddress}/30`, "dev", peer);
    ip("-n", name, "link", "set", peer, "up");
    ip("-n", name, "route", "add", "default", "via", rootAddress);
  } catch (e) {
    remove();
    throw new Error(`network namespace ${name}: ${((e as { stderr?: string }).stderr ?? (e as Error).message).trim()}`);
  }
  return { name, rootAddress, nsAddress, network: `${base}.${c}/30`, remove };
}

type Request = ChildRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/** netns-replica-child.ts running in a namespace. */
export interface NetnsChild {
  /** Sends a request; resolves with its result, rejects with its error (its `code` kept). */
  call<T = unknown>(req: Request): Promise<T>;
  /** Asks the child to stop its servers and exit; kills it if it has not within 60 s. */
  close(): Promise<void>;
}

/** Starts netns-replica-child.ts in namespace `ns` (as `ip netns exec <ns> node --import tsx …`). */
export function spawnChild(ns: string): NetnsChild {
  const child: ChildProcess = spawn(
    "ip",
    ["netns", "exec", ns, process.execPath, "--import", "tsx", path.join(here, "netns-replica-child.ts")],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let next = 1;
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      exited = true;
      for (const p of pending.values()) p.reject(new Error(`netns child exited (${code ?? signal})`));
      pending.clear();
      resolve();
    }),
  );
  readline.createInterface({ input: child.stdout! }).on("line", (line) => {
    if (!line.startsWith("@@ ")) return;
    const a = JSON.parse(line.slice(3)) as ChildAnswer;
    const p = pending.get(a.id);
    pending.delete(a.id);
    if (!p) return;
    if (a.ok) p.resolve(a.result);
    else p.reject(Object.assign(new Error(a.error), a.code ? { code: a.code } : {}));
  });
  return {
    call<T>(req: Request): Promise<T> {
      if (exited) return Promise.reject(new Error("netns child has exited"));
      const id = next++;
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        child.stdin!.write(`${JSON.stringify({ ...req, id })}\n`);
      });
    },
    async close() {
      if (exited) return;
      const id = next++;
      child.stdin!.write(`${JSON.stringify({ op: "close", id })}\n`);
      const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
      await exit;
      clearTimeout(timer);
    },
  };
}
