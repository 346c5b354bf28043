import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

/*
 * A real authoritative server for tests: Debian's BIND (`named`, package
 * bind9; `dig` and `nsupdate` from bind9-dnsutils), started on a free port in
 * a temporary directory with one zone that a TSIG key (hmac-sha256) may update.
 */

const run = promisify(execFile);

/** Why BIND tests cannot run here, or undefined when named, dig and nsupdate are installed. */
export function namedMissing(): string | undefined {
  for (const [bin, pkg] of [
    ["named", "bind9"],
    ["dig", "bind9-dnsutils"],
    ["nsupdate", "bind9-dnsutils"],
  ] as const) {
    if (spawnSync("sh", ["-c", `command -v ${bin}`]).status !== 0) return `${bin} is not installed (apt-get install ${pkg})`;
  }
  return undefined;
}

export interface Named {
  port: number;
  zone: string;
  keyName: string;
  /** The key's base64 secret. */
  secret: string;
  /** DNS_TSIG_KEY for this server. */
  tsigKey: string;
  /** DNS_SERVER for this server. */
  server: string;
  /** `dig +short` of `name`'s records of `type` as the server answers them now, sorted. */
  dig(name: string, type?: "A" | "AAAA"): Promise<string[]>;
  /** The answer's status (NOERROR, NXDOMAIN, …) for `name` A. */
  digStatus(name: string): Promise<string>;
  /** Runs nsupdate with these commands (server, zone and key given), as someone changing the zone behind our back. */
  nsupdate(commands: string[]): Promise<void>;
  /** What named logged (for a failing test's message). */
  output(): string;
  stop(): Promise<void>;
}

function freeTcpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export async function startNamed(zone = "db.test"): Promise<Named> {
  const dir = await mkdtemp(join(tmpdir(), "dbaas-named-"));
  const port = await freeTcpPort();
  const keyName = "dbaas-test-key";
  const secret = randomBytes(32).toString("base64");
  await writeFile(
    join(dir, "zone.db"),
    ["$TTL 300", `@ IN SOA ns.${zone}. admin.${zone}. 1 3600 600 86400 30`, `@ IN NS ns.${zone}.`, "ns IN A 127.0.0.1", ""].join("\n"),
  );
  await writeFile(
    join(dir, "named.conf"),
    `options {
  directory "${dir}";
  pid-file "${dir}/named.pid";
  session-keyfile "${dir}/session.key";
  managed-keys-directory "${dir}";
  listen-on port ${port} { 127.0.0.1; };
  listen-on-v6 { none; };
  recursion no;
  dnssec-validation no;
  allow-query { any; };
};
controls { };
key "${keyName}" { algorithm hmac-sha256; secret "${secret}"; };
zone "${zone}" { type primary; file "${dir}/zone.db"; journal "${dir}/zone.jnl"; allow-update { key "${keyName}"; }; };
`,
  );
  const child: ChildProcess = spawn("named", ["-g", "-c", join(dir, "named.conf")], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const deadline = Date.now() + 60_000;
  // "running" alone on its line: the last of start-up (an earlier line quotes the command it runs as).
  while (!/ running\r?$/m.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`named did not start:\n${output.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const digArgs = ["@127.0.0.1", "-p", String(port), "+norecurse", "+time=5", "+tries=2"];
  return {
    port,
    zone,
    keyName,
    secret,
    tsigKey: `hmac-sha256:${keyName}:${secret}`,
    server: `127.0.0.1:${port}`,
    async dig(name, type = "A") {
      const { stdout } = await run("dig", [...digArgs, "+short", name, type]);
      return stdout.split("\n").filter(Boolean).sort();
    },
    async digStatus(name) {
      const { stdout } = await run("dig", [...digArgs, name, "A"]);
      return /status: ([A-Z]+)/.exec(stdout)?.[1] ?? `no status in: ${stdout}`;
    },
    async nsupdate(commands) {
      const script = [`server 127.0.0.1 ${port}`, `zone ${zone}`, ...commands, "send", ""].join("\n");
      const p = spawn("nsupdate", ["-y", `hmac-sha256:${keyName}:${secret}`], { stdio: ["pipe", "pipe", "pipe"] });
      let err = "";
      p.stderr!.on("data", (c: Buffer) => (err += c.toString()));
      p.stdin!.end(script);
      const code = await new Promise<number | null>((r) => p.once("exit", r));
      if (code !== 0) throw new Error(`nsupdate failed (${code}): ${err}`);
    },
    output: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (child.exitCode === null) child.kill("SIGKILL");
      await rm(dir, { recursive: true, force: true });
    },
  };
}
