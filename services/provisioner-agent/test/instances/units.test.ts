import { X509Certificate } from "node:crypto";
import { mkdir, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import { tierSpec } from "@dbaas/catalogue";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveRunAs, runCommand } from "../../src/instances/run-as.ts";
import { tierSettings, TIER_NAMES } from "../../src/instances/tier-settings.ts";
import { ensureServerCertificate, issueServerCertificate, loadOrCreateCA, type AgentCA } from "../../src/instances/tls.ts";
import { tempDataDir } from "./helpers.ts";

const GiB = 1024 ** 3;
function mb(v: string): number {
  const n = Number.parseInt(v, 10);
  return v.endsWith("GB") ? n * 1024 : v.endsWith("kB") ? n / 1024 : n;
}

describe("tierSettings", () => {
  it("is strictly increasing in shared_buffers and max_connections", () => {
    const all = TIER_NAMES.map((t) => tierSettings(t, 24 * GiB));
    for (let i = 1; i < all.length; i++) {
      expect(mb(all[i]!.shared_buffers!)).toBeGreaterThan(mb(all[i - 1]!.shared_buffers!));
      expect(Number(all[i]!.max_connections)).toBeGreaterThan(Number(all[i - 1]!.max_connections));
    }
  });

  it("gives micro 16-32MB shared_buffers on a 24 GB host, and real figures on a big host", () => {
    const micro = mb(tierSettings("micro", 24 * GiB).shared_buffers!);
    expect(micro).toBeGreaterThanOrEqual(16);
    expect(micro).toBeLessThanOrEqual(32);
    expect(tierSettings("micro", 1024 * GiB).shared_buffers).toBe("256MB");
    expect(tierSettings("small", 24 * GiB, { scale: 1 }).shared_buffers).toBe("1024MB");
  });

  it("limits a session's temporary files to 20 % of the tier's storage (temp_file_limit, in kB)", () => {
    for (const t of TIER_NAMES) {
      const kb = Math.round((tierSpec(t).storageGb * GiB * 0.2) / 1024);
      expect({ t, limit: tierSettings(t, 24 * GiB).temp_file_limit }).toEqual({ t, limit: `${kb}kB` });
    }
    expect(tierSettings("micro", 24 * GiB).temp_file_limit).toBe("2097152kB");
  });

  it("rejects unknown tiers", () => {
    expect(() => tierSettings("gigantic")).toThrow(/unknown tier/);
  });
});

describe("runCommand", () => {
  it("reports the stderr tail on failure", async () => {
    await expect(runCommand("/bin/sh", ["-c", "echo boom-detail >&2; exit 3"])).rejects.toThrow(/exited with code 3: boom-detail/);
  });

  it("runs as the resolved user", async () => {
    const who = resolveRunAs();
    const { stdout } = await runCommand("/usr/bin/id", ["-u"], { runAs: who });
    expect(Number(stdout.trim())).toBe(who.uid);
  });
});

describe("agent CA and server certificates", () => {
  let dir: string;
  let ca: AgentCA;
  beforeAll(async () => {
    dir = await tempDataDir("tls");
    ca = await loadOrCreateCA(path.join(dir, "ca"), "agent-7");
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("creates an EC P-256 CA once and reuses it", async () => {
    expect(ca.cert.subject).toBe("CN=dbaas agent CA agent-7");
    expect(ca.cert.ca).toBe(true);
    expect(ca.cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    expect(new Date(ca.cert.validTo).getTime() - Date.now()).toBeGreaterThan(9.9 * 365 * 24 * 3600 * 1000);
    expect((await stat(ca.keyPath)).mode & 0o777).toBe(0o600);
    const again = await loadOrCreateCA(path.join(dir, "ca"), "agent-7");
    expect(again.certPem).toBe(ca.certPem);
  });

  it("issues a server certificate with the right SANs, key 0600 owned by the run-as user", async () => {
    const out = path.join(dir, "srv");
    await mkdir(out);
    const owner = resolveRunAs();
    await issueServerCertificate(ca, "db1.example.test", out, { owner });
    const cert = new X509Certificate(await readFile(path.join(out, "server.crt")));
    expect(cert.checkIssued(ca.cert)).toBe(true);
    expect(cert.verify(ca.cert.publicKey)).toBe(true);
    expect(cert.subjectAltName).toBe("DNS:db1.example.test, DNS:localhost, IP Address:127.0.0.1");
    expect(cert.ca).toBe(false);
    const key = await stat(path.join(out, "server.key"));
    expect(key.mode & 0o777).toBe(0o600);
    expect(key.uid).toBe(owner.uid);
    // Valid and matching: nothing to do. New host name: reissue.
    expect(await ensureServerCertificate(ca, "db1.example.test", out, { owner })).toBe(false);
    expect(await ensureServerCertificate(ca, "db2.example.test", out, { owner })).toBe(true);
    expect(new X509Certificate(await readFile(path.join(out, "server.crt"))).checkHost("db2.example.test")).toBe("db2.example.test");
  });

  it("refuses host names that are not DNS names", async () => {
    await expect(issueServerCertificate(ca, "evil/CN=x", dir)).rejects.toThrow(/invalid hostname/);
  });
});
