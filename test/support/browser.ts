import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";

/**
 * Headless Chromium (Debian's `chromium` package; `CHROMIUM` names another
 * binary) driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
 * JSON messages ended by a NUL byte, commands on fd 3, answers and events on
 * fd 4) — Node only, no browser library.
 */
export interface Browser {
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

export interface Page {
  /** Loads `url` and resolves once its load event fired. */
  goto(url: string): Promise<void>;
  /** The value of a JavaScript expression in the page (awaited when it is a promise). */
  evaluate<T>(expression: string): Promise<T>;
  /** Polls `expression` until it is truthy and returns its value. */
  waitFor<T>(expression: string, what: string, timeoutMs?: number): Promise<T>;
  /** Focuses the element and types `text` into it as a user would (input events). */
  type(selector: string, text: string): Promise<void>;
  /** Clicks the middle of the element with the mouse. */
  click(selector: string): Promise<void>;
  /** A PNG of the viewport, for looking at a failure. */
  screenshot(): Promise<Buffer>;
  /** Every URL the page requested, in order. */
  readonly requests: string[];
  /** Console errors, uncaught exceptions, failed loads and Content-Security-Policy violations. */
  readonly problems: string[];
}

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-quic",
  "--no-first-run",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
  "--window-size=1280,900",
  "--remote-debugging-pipe",
];

interface Message {
  id?: number;
  method?: string;
  params?: any;
  result?: any;
  error?: { message: string };
  sessionId?: string;
}

type Listener = (params: any, sessionId: string | undefined) => void;

export async function launchBrowser(): Promise<Browser> {
  const profile = await mkdtemp(join(tmpdir(), "dbaas-chromium-"));
  const binary = process.env.CHROMIUM ?? "chromium";
  const child: ChildProcess = spawn(binary, [...FLAGS, `--user-data-dir=${profile}`, "about:blank"], {
    stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const failed = new Promise<never>((_, fail) => {
    child.once("error", (err: NodeJS.ErrnoException) =>
      fail(err.code === "ENOENT" ? new Error(`${binary} not found: apt-get install chromium (or set CHROMIUM)`) : err),
    );
    void exited.then(() => fail(new Error(`${binary} exited:\n${stderr}`)));
  });
  failed.catch(() => {});

  const input = child.stdio[3] as Writable;
  const output = child.stdio[4] as Readable;
  let nextId = 1;
  const pending = new Map<number, { resolve: (result: any) => void; reject: (err: Error) => void; method: string }>();
  const listeners = new Map<string, Set<Listener>>();
  let buffered = "";
  output.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    for (let end = buffered.indexOf("\0"); end >= 0; end = buffered.indexOf("\0")) {
      const message = JSON.parse(buffered.slice(0, end)) as Message;
      buffered = buffered.slice(end + 1);
      if (message.id !== undefined) {
        const call = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) call?.reject(new Error(`${call.method}: ${message.error.message}`));
        else call?.resolve(message.result);
      } else if (message.method) {
        for (const listener of listeners.get(message.method) ?? []) listener(message.params, message.sessionId);
      }
    }
  });

  const send = (method: string, params: object = {}, sessionId?: string): Promise<any> => {
    const id = nextId++;
    const answer = new Promise<any>((resolve, reject) => pending.set(id, { resolve, reject, method }));
    input.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + "\0");
    return Promise.race([answer, failed]);
  };
  const on = (method: string, listener: Listener): (() => void) => {
    const set = listeners.get(method) ?? new Set();
    listeners.set(method, set);
    set.add(listener);
    return () => set.delete(listener);
  };

  await send("Browser.getVersion");

  async function newPage(): Promise<Page> {
    const { targetId } = await send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
    const call = (method: string, params: object = {}) => send(method, params, sessionId);
    const requests: string[] = [];
    const problems: string[] = [];
    const mine =
      (listener: (params: any) => void): Listener =>
      (params, from) => {
        if (from === sessionId) listener(params);
      };
    on(
      "Network.requestWillBeSent",
      mine((p) => requests.push(p.request.url)),
    );
    on(
      "Network.loadingFailed",
      mine((p) => problems.push(`load failed: ${p.errorText} ${p.blockedReason ?? ""}`.trim())),
    );
    on(
      "Runtime.exceptionThrown",
      mine((p) => problems.push(`exception: ${p.exceptionDetails.exception?.description ?? p.exceptionDetails.text}`)),
    );
    on(
      "Runtime.consoleAPICalled",
      mine((p) => {
        if (p.type === "error" || p.type === "assert")
          problems.push(`console: ${p.args.map((a: any) => a.value ?? a.description).join(" ")}`);
      }),
    );
    on(
      "Log.entryAdded",
      mine((p) => {
        if (p.entry.level === "error") problems.push(`log: ${p.entry.text} ${p.entry.url ?? ""}`.trim());
      }),
    );
    await Promise.all([call("Page.enable"), call("Runtime.enable"), call("Network.enable"), call("Log.enable")]);
    // A blocked resource is reported to the page, not always to the log: report it as a console error.
    await call("Page.addScriptToEvaluateOnNewDocument", {
      source: `addEventListener("securitypolicyviolation", (e) => console.error("CSP violation: " + e.violatedDirective + " " + e.blockedURI));`,
    });

    const evaluate = async <T>(expression: string): Promise<T> => {
      const { result, exceptionDetails } = await call("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
      if (exceptionDetails)
        throw new Error(`evaluating ${expression}: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`);
      return result.value as T;
    };

    return {
      requests,
      problems,
      async goto(url) {
        const loaded = new Promise<void>((done) => {
          const off = on(
            "Page.loadEventFired",
            mine(() => {
              off();
              done();
            }),
          );
        });
        const { errorText } = await call("Page.navigate", { url });
        if (errorText) throw new Error(`navigating to ${url}: ${errorText}`);
        await loaded;
      },
      evaluate,
      async waitFor<T>(expression: string, what: string, timeoutMs = 15_000): Promise<T> {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
          const value = await evaluate<T>(expression);
          if (value) return value;
          if (Date.now() > deadline) {
            const text = await evaluate<string>("document.body ? document.body.innerText : ''").catch(() => "");
            throw new Error(`${what}: not seen after ${timeoutMs} ms\npage text: ${text.slice(0, 2000)}\nproblems: ${problems.join("\n")}`);
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      async type(selector, text) {
        const found = await evaluate<boolean>(
          `(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return false; e.focus(); return document.activeElement === e; })()`,
        );
        if (!found) throw new Error(`no focusable ${selector}`);
        await call("Input.insertText", { text });
      },
      async screenshot() {
        const { data } = await call("Page.captureScreenshot", { format: "png" });
        return Buffer.from(data as string, "base64");
      },
      async click(selector) {
        const box = await evaluate<{ x: number; y: number } | null>(
          `(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return null;
             e.scrollIntoView({ block: "center" }); const r = e.getBoundingClientRect();
             return { x: r.left + r.width / 2, y: r.top + r.height / 2 }; })()`,
        );
        if (!box) throw new Error(`no ${selector} to click`);
        for (const type of ["mousePressed", "mouseReleased"]) {
          await call("Input.dispatchMouseEvent", { type, x: box.x, y: box.y, button: "left", clickCount: 1 });
        }
      },
    };
  }

  return {
    newPage,
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        await Promise.race([send("Browser.close").catch(() => {}), new Promise((r) => setTimeout(r, 3_000))]);
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      await rm(profile, { recursive: true, force: true });
    },
  };
}
