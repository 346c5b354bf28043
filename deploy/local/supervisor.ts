import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { writeChildPid } from "./run-state.ts";

/**
 * The runner's children: each service is a Node process in its own process
 * group (a terminal's Ctrl-C reaches only the runner, which then stops each
 * child once and in order), restarted when it exits, and watching the runner
 * through fd 3 (child-guard.ts) so that it stops when the runner dies.
 */
export interface Service {
  name: string;
  /** The service's bundle (bundle.ts), run by plain Node. */
  entry: string;
  env: Record<string, string>;
  health: () => Promise<boolean>;
  child?: ChildProcess;
  /** Restarts in a row; back to 0 once a child has run for a while. */
  restarts: number;
}

const tty = process.stdout.isTTY;
const COLORS = ["36", "35", "33", "32", "34", "31"];

function printLine(name: string, color: string, line: string) {
  let text = line;
  try {
    const { time: _t, level, service: _s, msg, ...rest } = JSON.parse(line) as Record<string, unknown>;
    const fields = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
    text = `${level === "info" ? "" : `${String(level).toUpperCase()} `}${msg} ${fields.join(" ")}`.trimEnd();
  } catch {
    // Not one of our JSON lines (e.g. a crash trace): print as it is.
  }
  const label = name.padEnd(10);
  process.stdout.write(`${tty ? `\x1b[${color}m${label}\x1b[0m` : label} | ${text}\n`);
}

/**
 * A child that ran this long before exiting is restarted at once, as after its
 * first crash; one dying sooner (a crash loop at start-up) backs off.
 */
const STABLE_MS = 10_000;

export interface Supervisor {
  launch(svc: Service): void;
  /** SIGTERM to each child, in the order given (one group after another), SIGKILL after 20 s. */
  stop(groups: Service[][]): Promise<void>;
}

/**
 * `<dataDir>/run/hold/<service>`: while it exists, the service is not
 * restarted when it exits — how the local stack simulates a host that is
 * lost (its agent killed and gone) until someone brings it back (removes the file).
 */
export const holdFilePath = (dataDir: string, service: string) => join(dataDir, "run", "hold", service);

/** `guard`: the bundle of child-guard.ts, loaded into every child with `--import`. */
export function createSupervisor(root: string, dataDir: string, guard: string): Supervisor {
  const guardUrl = pathToFileURL(guard).href;
  const holdFile = (name: string) => holdFilePath(dataDir, name);
  const held = (name: string) => existsSync(holdFile(name));
  let stopping = false;
  const colors = new Map<string, string>();

  const launch = (svc: Service) => {
    if (!colors.has(svc.name)) colors.set(svc.name, COLORS[colors.size % COLORS.length]!);
    const color = colors.get(svc.name)!;
    const child = spawn(process.execPath, ["--import", guardUrl, svc.entry], {
      cwd: root,
      env: { ...process.env, ...svc.env, DBAAS_RUNNER_FD: "3" },
      // fd 3: the child's end of a socket pair whose other end only this process holds (see child-guard.ts).
      stdio: ["ignore", "pipe", "pipe", "pipe"],
      detached: true,
    });
    svc.child = child;
    const startedAt = Date.now();
    // For operators and crash tests: which process is which service right now.
    if (child.pid !== undefined) void writeChildPid(dataDir, svc.name, child.pid);
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on("line", (l) => printLine(svc.name, color, l));
    }
    child.on("exit", (code, signal) => {
      if (stopping) return;
      // A crashed service is restarted, as a supervisor would: the system converges after any one crash.
      svc.restarts = Date.now() - startedAt > STABLE_MS ? 1 : svc.restarts + 1;
      // At once after a stable run; 250 ms, 500 ms, … up to 5 s for a crash loop.
      const delay = svc.restarts === 1 ? 0 : Math.min(250 * 2 ** (svc.restarts - 2), 5_000);
      if (held(svc.name)) printLine(svc.name, color, `exited (${signal ?? code}); held: not restarted while ${holdFile(svc.name)} exists`);
      else printLine(svc.name, color, `exited (${signal ?? code}); restarting in ${delay} ms`);
      const relaunch = () => {
        if (stopping) return;
        // A lost host, simulated: the service stays down until its hold file goes.
        if (held(svc.name)) return void setTimeout(relaunch, 250);
        launch(svc);
      };
      setTimeout(relaunch, delay);
    });
  };

  const stopOne = (svc: Service) =>
    new Promise<void>((done) => {
      const c = svc.child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return done();
      const kill = setTimeout(() => c.kill("SIGKILL"), 20_000);
      c.once("exit", () => {
        clearTimeout(kill);
        done();
      });
      c.kill("SIGTERM");
    });

  return {
    launch,
    async stop(groups) {
      stopping = true;
      for (const group of groups) await Promise.all(group.map(stopOne));
    },
  };
}

export function h2Health(port: number): Promise<boolean> {
  return new Promise((resolveOk) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => resolveOk(false));
    session.setTimeout(5_000, () => {
      session.destroy();
      resolveOk(false);
    });
    const req = session.request({ ":path": "/healthz" });
    req.on("response", (h) => {
      resolveOk(h[":status"] === 200);
      req.resume();
      session.destroy();
    });
    req.on("error", () => resolveOk(false));
    req.end();
  });
}

export function h1Health(port: number): Promise<boolean> {
  return new Promise((resolveOk) => {
    http
      .get({ host: "127.0.0.1", port, path: "/healthz", timeout: 5_000 }, (res) => {
        res.resume();
        resolveOk(res.statusCode === 200);
      })
      .on("timeout", function (this: http.ClientRequest) {
        this.destroy();
      })
      .on("error", () => resolveOk(false));
  });
}

export async function waitHealthy(svc: Service, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await svc.health()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${svc.name} did not become healthy within ${timeoutMs / 1000}s`);
}
