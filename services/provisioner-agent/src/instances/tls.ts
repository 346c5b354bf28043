import { X509Certificate, createPrivateKey, createPublicKey, randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { chmod, mkdir, mkdtemp, open, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import os from "node:os";
import path from "node:path";
import { chownNoFollow, UnsafePathError, writeOwned } from "../safe-fs.ts";
import { type RunAsIdentity, runCommand } from "./run-as.ts";

const OPENSSL = "/usr/bin/openssl";
const CA_DAYS = 3650;
const SERVER_DAYS = 397;
/** Reissue server certificates this long before they expire. */
const RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;

/**
 * openssl `req` insists on a config file; this one carries nothing but the
 * mandatory sections so the system openssl.cnf (whose x509 defaults mark every
 * certificate as a CA) cannot leak into what we issue.
 */
const REQ_CONFIG = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n";

/** The agent's certificate authority, persisted on disk. */
export interface AgentCA {
  dir: string;
  certPath: string;
  keyPath: string;
  /** PEM of the CA certificate: what clients pin for verify-full. */
  certPem: string;
  cert: X509Certificate;
}

/** Owner to give issued files, so the postgres user can read its key. */
export interface FileOwner {
  uid: number;
  gid: number;
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

async function openssl(args: string[]): Promise<void> {
  await runCommand(OPENSSL, args, { timeoutMs: 30_000 });
}

/**
 * Loads the agent CA from `dir`, creating it on first use (EC P-256, 10
 * years, CN "dbaas agent CA <agentId>"). The certificate is renamed into
 * place last, so its presence means the pair is complete; a key without a
 * certificate is a crash leftover and is regenerated. An existing CA is
 * reused even if `agentId` changed, because clients may already pin it.
 */
export async function loadOrCreateCA(dir: string, agentId: string): Promise<AgentCA> {
  const certPath = path.join(dir, "ca.crt");
  const keyPath = path.join(dir, "ca.key");
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  if (!(await exists(certPath)) || !(await exists(keyPath))) {
    const cn = `dbaas agent CA ${agentId}`.replace(/[^A-Za-z0-9 ._-]/g, "_").slice(0, 64);
    const tag = randomBytes(4).toString("hex");
    const cfg = path.join(dir, `req.cnf.tmp-${tag}`);
    const tmpKey = path.join(dir, `ca.key.tmp-${tag}`);
    const tmpCrt = path.join(dir, `ca.crt.tmp-${tag}`);
    try {
      await writeFile(cfg, REQ_CONFIG, { mode: 0o600 });
      await openssl([
        "req",
        "-config",
        cfg,
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        tmpKey,
        "-out",
        tmpCrt,
        "-days",
        String(CA_DAYS),
        "-subj",
        `/CN=${cn}`,
        "-addext",
        "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      ]);
      await chmod(tmpKey, 0o600);
      await rename(tmpKey, keyPath);
      await rename(tmpCrt, certPath);
    } finally {
      await Promise.all([cfg, tmpKey, tmpCrt].map((f) => rm(f, { force: true })));
    }
  }
  const certPem = await readFile(certPath, "utf8");
  const cert = new X509Certificate(certPem);
  const key = createPrivateKey(await readFile(keyPath));
  if (!sameKey(cert, key)) throw new Error(`CA in ${dir}: ca.key does not match ca.crt; refusing to guess which to keep`);
  return { dir, certPath, keyPath, certPem, cert };
}

function sameKey(cert: X509Certificate, key: ReturnType<typeof createPrivateKey>): boolean {
  const a = cert.publicKey.export({ type: "spki", format: "der" });
  const b = createPublicKey(key).export({ type: "spki", format: "der" });
  return a.equals(b);
}

/**
 * Throws unless `hostname` is an IP address or a plain DNS name: the only
 * things we put into a certificate (which also keeps openssl arguments inert).
 */
export function checkHostname(hostname: string): void {
  if (isIP(hostname)) return;
  if (hostname.length > 253 || !/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*$/.test(hostname)) {
    throw new Error(`invalid hostname for certificate: ${JSON.stringify(hostname)}`);
  }
}

function subjectAltName(hostname: string): string {
  const names = new Set<string>([isIP(hostname) ? `IP:${hostname}` : `DNS:${hostname}`, "DNS:localhost", "IP:127.0.0.1"]);
  return [...names].join(",");
}

export interface IssueOptions {
  /** chown the written files to this owner (the run-as user). */
  owner?: FileOwner;
}

/** Who writes the issued files: `owner` (files.ts writeOwned chowns them on the descriptor), else the agent itself. */
const writerOf = (owner: FileOwner | undefined): RunAsIdentity =>
  owner
    ? { user: `uid ${owner.uid}`, uid: owner.uid, gid: owner.gid, switchUser: true }
    : { user: "agent", uid: -1, gid: -1, switchUser: false };

/**
 * Issues `server.crt`/`server.key` in `outDir` for `hostname` (SAN also
 * covers localhost and 127.0.0.1), signed by `ca`. The key is mode 0600 and
 * owned by `opts.owner`, which PostgreSQL requires. openssl runs in a private
 * directory of the agent's own (never in `outDir`, which the server's user can
 * write: a link planted there would have root's openssl write through it, a
 * config swapped in would load what it names); the pair is then written into
 * `outDir` by writeOwned (O_EXCL|O_NOFOLLOW, fchown/fchmod, rename), the key
 * first, so an interrupted issue leaves either the old pair or a detectable
 * mismatch that {@link ensureServerCertificate} repairs. One openssl process
 * with an EC key: a few milliseconds.
 */
export async function issueServerCertificate(ca: AgentCA, hostname: string, outDir: string, opts: IssueOptions = {}): Promise<void> {
  checkHostname(hostname);
  const work = await mkdtemp(path.join(os.tmpdir(), "dbaas-cert-"));
  const cfg = path.join(work, "req.cnf");
  const tmpKey = path.join(work, "server.key");
  const tmpCrt = path.join(work, "server.crt");
  try {
    await writeFile(cfg, REQ_CONFIG, { mode: 0o600, flag: "wx" });
    await openssl([
      "req",
      "-config",
      cfg,
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      tmpKey,
      "-out",
      tmpCrt,
      "-CA",
      ca.certPath,
      "-CAkey",
      ca.keyPath,
      "-days",
      String(SERVER_DAYS),
      "-subj",
      `/CN=${hostname}`,
      "-addext",
      `subjectAltName=${subjectAltName(hostname)}`,
      "-addext",
      "basicConstraints=critical,CA:FALSE",
      "-addext",
      "keyUsage=critical,digitalSignature",
      "-addext",
      "extendedKeyUsage=serverAuth",
    ]);
    const writer = writerOf(opts.owner);
    await writeOwned(writer, path.join(outDir, "server.key"), await readFile(tmpKey), 0o600);
    await writeOwned(writer, path.join(outDir, "server.crt"), await readFile(tmpCrt), 0o644);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * Makes sure `outDir` holds a server certificate usable for `hostname`:
 * issued by `ca`, matching its key, covering the host name, and not close to
 * expiry. Reissues otherwise. Returns whether a new certificate was written,
 * so a running server knows it must reload. `server.key` or `server.crt` being
 * a symbolic link or not a regular file (a server's user can plant one: `outDir`
 * is its) is refused with an UnsafePathError, never read or chowned through.
 */
export async function ensureServerCertificate(ca: AgentCA, hostname: string, outDir: string, opts: IssueOptions = {}): Promise<boolean> {
  checkHostname(hostname);
  if (await serverCertificateValid(ca, hostname, outDir)) {
    if (opts.owner) {
      // Cheap, and repairs ownership if the run-as user changed since issue; on the descriptor, never through a link.
      await chownNoFollow(path.join(outDir, "server.key"), opts.owner, 0o600);
      await chownNoFollow(path.join(outDir, "server.crt"), opts.owner);
    }
    return false;
  }
  await issueServerCertificate(ca, hostname, outDir, opts);
  return true;
}

/** `file`'s bytes if it is a regular file (undefined if missing); a link or anything else is refused. */
async function readIssued(file: string): Promise<Buffer | undefined> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw new UnsafePathError(`refusing ${file}: it is a symbolic link (planted by the server's user?)`);
    throw e;
  }
  try {
    if (!(await fh.stat()).isFile()) throw new UnsafePathError(`refusing ${file}: not a regular file`);
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

async function serverCertificateValid(ca: AgentCA, hostname: string, outDir: string): Promise<boolean> {
  const crt = await readIssued(path.join(outDir, "server.crt"));
  const keyPem = await readIssued(path.join(outDir, "server.key"));
  if (!crt || !keyPem) return false;
  try {
    const cert = new X509Certificate(crt);
    const key = createPrivateKey(keyPem);
    if (!sameKey(cert, key)) return false;
    if (!cert.checkIssued(ca.cert) || !cert.verify(ca.cert.publicKey)) return false;
    const covers = isIP(hostname) ? cert.checkIP(hostname) : cert.checkHost(hostname, { wildcards: false });
    if (!covers || !cert.checkHost("localhost") || !cert.checkIP("127.0.0.1")) return false;
    return new Date(cert.validTo).getTime() - Date.now() > RENEW_BEFORE_MS;
  } catch {
    return false;
  }
}
