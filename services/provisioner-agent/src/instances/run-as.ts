import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** The OS identity PostgreSQL processes run as. */
export interface RunAsIdentity {
  /** User name, for messages. */
  user: string;
  uid: number;
  gid: number;
  /**
   * True when the agent is root and must switch to `uid`/`gid` for server
   * processes: PostgreSQL refuses to run as root.
   */
  switchUser: boolean;
}

/**
 * Resolves the identity to run PostgreSQL as. As root this is `runAsUser`
 * (default "nobody"); otherwise the agent's own identity, since an
 * unprivileged process cannot switch users anyway.
 *
 * /etc/passwd is parsed directly because `os.userInfo()` only describes the
 * current process, and spawning `id` for every lookup is needless.
 */
export function resolveRunAs(runAsUser = "nobody"): RunAsIdentity {
  const getuid = process.getuid?.bind(process);
  const getgid = process.getgid?.bind(process);
  if (!getuid || !getgid) throw new Error("resolveRunAs: POSIX user ids are not available on this platform");
  if (getuid() !== 0) {
    let user = String(getuid());
    try {
      user = os.userInfo().username;
    } catch {
      // no passwd entry for our uid (containers): the number will do
    }
    return { user, uid: getuid(), gid: getgid(), switchUser: false };
  }
  let passwd = "";
  try {
    passwd = readFileSync("/etc/passwd", "utf8");
  } catch {
    // fall through: a numeric runAsUser still works without a passwd file
  }
  for (const line of passwd.split("\n")) {
    const f = line.split(":");
    if (f.length >= 4 && f[0] === runAsUser) {
      const uid = Number(f[2]);
      const gid = Number(f[3]);
      if (Number.isInteger(uid) && Number.isInteger(gid)) return checkNotRoot({ user: runAsUser, uid, gid, switchUser: true });
    }
  }
  if (/^\d+$/.test(runAsUser)) {
    const uid = Number(runAsUser);
    return checkNotRoot({ user: runAsUser, uid, gid: uid, switchUser: true });
  }
  throw new Error(`resolveRunAs: user "${runAsUser}" not found in /etc/passwd`);
}

function checkNotRoot(id: RunAsIdentity): RunAsIdentity {
  if (id.uid === 0) throw new Error(`resolveRunAs: "${id.user}" is root; PostgreSQL refuses to run as root`);
  return id;
}

/** A command that exited unsuccessfully; the message carries the stderr tail. */
class CommandError extends Error {
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = "CommandError";
  }
}

export interface RunOptions {
  /** Run as this identity (switches uid/gid only when `switchUser`). */
  runAs?: RunAsIdentity;
  /** Complete environment; defaults to {@link serverEnv}. */
  env?: NodeJS.ProcessEnv;
  /** Defaults to "/" so a root-only current directory cannot break the child. */
  cwd?: string;
  /** Kill the child (SIGKILL) after this long. Default 120 s. */
  timeoutMs?: number;
  /** Written to the child's stdin, which is then closed. */
  input?: string;
  /**
   * Runs with the child's pid before `file` is executed (the child waits in a
   * shell until it resolves): what the program forks afterwards inherits
   * what this did to the child, say its cgroup (cgroups.ts). If it throws,
   * the child is killed and the command fails with that error.
   */
  beforeExec?: (pid: number) => Promise<void>;
}

/** A shell that waits for one line on stdin, then becomes the command: the pid is known before the program runs. */
const WAIT_THEN_EXEC = 'read -r _ && exec "$0" "$@"';

export interface RunResult {
  stdout: string;
  stderr: string;
}

const TAIL_CHARS = 2000;

/**
 * A minimal environment for server tools. Deliberately not `process.env`: the
 * agent's own secrets must not leak into long-lived postgres processes, and
 * stray PG* variables (PGDATA, PGPORT, ...) would silently change what
 * initdb/pg_ctl do.
 */
export function serverEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    LANG: "C",
    LC_ALL: "C",
    ...(process.env.TZ ? { TZ: process.env.TZ } : {}),
  };
}

/**
 * Runs `file args...` without a shell, as `opts.runAs` when given, and
 * resolves with its output. Rejects with a {@link CommandError} whose message
 * includes the tail of stderr (or stdout) on a non-zero exit, signal, or
 * timeout, because that tail is what an operator needs to see.
 */
export function runCommand(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const timeoutMs = opts.timeoutMs ?? 120_000;
  return new Promise<RunResult>((resolve, reject) => {
    const [exe, argv] = opts.beforeExec ? ["/bin/sh", ["-c", WAIT_THEN_EXEC, file, ...args]] : [file, args];
    const child = spawn(exe, argv, {
      cwd: opts.cwd ?? "/",
      env: opts.env ?? serverEnv(),
      stdio: ["pipe", "pipe", "pipe"],
      // libuv also drops supplementary groups when uid/gid are set.
      ...(opts.runAs?.switchUser ? { uid: opts.runAs.uid, gid: opts.runAs.gid } : {}),
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.stdin.on("error", () => {
      // the child may exit without reading stdin; the exit status reports the real problem
    });
    if (!opts.beforeExec) child.stdin.end(opts.input ?? "");
    else if (child.pid !== undefined) {
      opts.beforeExec(child.pid).then(
        () => child.stdin.end(`\n${opts.input ?? ""}`),
        (e: unknown) => {
          clearTimeout(timer);
          child.kill("SIGKILL");
          reject(e);
        },
      );
    }
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new CommandError(`${path.basename(file)}: ${e.message}`, null, null, "", ""));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const stdout = Buffer.concat(out).toString("utf8");
      const stderr = Buffer.concat(err).toString("utf8");
      if (code === 0 && !timedOut) {
        resolve({ stdout, stderr });
        return;
      }
      const how = timedOut ? `timed out after ${timeoutMs} ms` : signal ? `was killed by ${signal}` : `exited with code ${code}`;
      const tail = (stderr.trim() || stdout.trim()).slice(-TAIL_CHARS);
      const cmd = [path.basename(file), ...args].join(" ");
      reject(new CommandError(`${cmd} ${how}${tail ? `: ${tail}` : ""}`, code, signal, stdout, stderr));
    });
  });
}
