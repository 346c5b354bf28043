import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chown, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createInternalClient } from "@dbaas/kit";
import { ProvisionerService } from "@dbaas/proto/provisioner";
import { afterAll, describe, expect, it } from "vitest";
import { isolationOf } from "../src/instances/tenant-users.ts";
import { freePort, waitFor } from "./support/fixture.ts";

// docs/product.md, "Tenant isolation on an agent host": an agent that cannot switch users runs every server as itself,
// says so (start-up line, agent status, /healthz), and refuses NODE_ENV=production unless AGENT_ALLOW_SHARED_UID=1.
// The agent runs as a real process of `nobody` (no capabilities), so this needs root and setpriv.

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const MAIN = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "main.ts");
const NOBODY = 65534;

describe("isolation mode", () => {
  it("root, or CAP_CHOWN + CAP_SETGID + CAP_SETUID in effect, can give each server its own user; anything less cannot", () => {
    expect(isolationOf(0, "")).toBe("per-tenant-uid");
    expect(isolationOf(1000, "Name:\tnode\nCapEff:\t00000000000000c1\n")).toBe("per-tenant-uid");
    expect(isolationOf(1000, "CapEff:\t000001ffffffffff\n")).toBe("per-tenant-uid");
    // Without CAP_CHOWN (bit 0), or with none.
    expect(isolationOf(1000, "CapEff:\t00000000000000c0\n")).toBe("shared-uid");
    expect(isolationOf(1000, "CapEff:\t0000000000000000\n")).toBe("shared-uid");
  });
});

describe.skipIf(process.getuid?.() !== 0 || !SETPRIV)(
  "the shared-uid fallback: an agent running as nobody (root, setpriv)",
  { timeout: 240_000 },
  () => {
    const dirs: string[] = [];
    const children: ChildProcess[] = [];
    const secret = randomBytes(32).toString("hex");

    afterAll(async () => {
      for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
      for (const d of dirs) await rm(d, { recursive: true, force: true });
    }, 60_000);

    /** The agent's main as nobody, with its own data directory and port; its output collected. */
    async function agentAsNobody(env: Record<string, string>) {
      const dir = await mkdtemp(path.join(os.tmpdir(), "dbaas-it-shared-"));
      dirs.push(dir);
      await chown(dir, NOBODY, NOBODY);
      const port = await freePort();
      const child = spawn(
        SETPRIV!,
        [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", process.execPath, "--import", "tsx", MAIN],
        {
          cwd: path.dirname(MAIN),
          env: {
            PATH: process.env.PATH ?? "/usr/bin:/bin",
            PORT: String(port),
            AGENT_ID: `shared-${port}`,
            AGENT_DATA_DIR: path.join(dir, "agent"),
            BACKUP_STORE_URL: `file://${path.join(dir, "store")}`,
            DATABASES_URL: "http://127.0.0.1:9",
            INTERNAL_AUTH_SECRET: secret,
            AGENT_REPLICATION_SECRET: randomBytes(32).toString("hex"),
            BACKUP_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
            CONNECTION_METER: "proxy",
            ...env,
          },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      children.push(child);
      let output = "";
      child.stdout!.on("data", (b: Buffer) => (output += b.toString()));
      child.stderr!.on("data", (b: Buffer) => (output += b.toString()));
      const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      return { port, child, exited, output: () => output };
    }

    it("refuses to start with NODE_ENV=production, saying why", async () => {
      const agent = await agentAsNobody({ NODE_ENV: "production" });
      const code = await Promise.race([agent.exited, new Promise<"running">((r) => setTimeout(() => r("running"), 90_000))]);
      expect(code).toBe(1);
      expect(agent.output()).toMatch(/isolation: shared-uid: this agent \(uid 65534\) cannot switch users/);
      expect(agent.output()).toMatch(/Refusing to start with NODE_ENV=production.*AGENT_ALLOW_SHARED_UID=1/);
    });

    it("with AGENT_ALLOW_SHARED_UID=1 it starts, and says shared-uid at start-up, in /healthz and in the agent status", async () => {
      const agent = await agentAsNobody({ NODE_ENV: "production", AGENT_ALLOW_SHARED_UID: "1" });
      // It serves once its templates are built (initdb, as nobody): generous under load.
      const health = await waitFor(
        async () => {
          if (agent.child.exitCode !== null) throw new Error(`agent exited ${agent.child.exitCode}: ${agent.output()}`);
          const r = await fetch(`http://127.0.0.1:${agent.port}/healthz`).catch(() => undefined);
          return r?.ok ? ((await r.json()) as Record<string, unknown>) : undefined;
        },
        180_000,
        "the agent's /healthz",
      );
      // CONNECTION_METER=proxy: the weaker guard of private ports, said so.
      expect(health).toMatchObject({ status: "ok", isolation: "shared-uid", private_ports_guard: "source-address" });
      expect(agent.output()).toMatch(/isolation: shared-uid: this agent \(uid 65534\) cannot switch users/);
      const client = createInternalClient(ProvisionerService, `http://127.0.0.1:${agent.port}`, { secret, caller: "support" });
      expect((await client.getAgentStatus({}, { timeoutMs: 30_000 })).isolation).toBe("shared-uid");
      agent.child.kill("SIGTERM");
      expect(await agent.exited).toBe(0);
    });
  },
);
