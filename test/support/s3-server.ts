/**
 * A real S3-compatible server for tests: s3rver (test/support/s3rver-process.ts)
 * in a child process on a free port, storing into a temp directory, with one
 * bucket. `url` and `env` are what an agent gets as BACKUP_STORE_URL and
 * environment.
 *
 * s3rver is not S3 in three ways a test may meet: it does not implement
 * AbortMultipartUpload (405), concurrent PUTs of one key can interleave in
 * its files, and it answers a PUT before its file is flushed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export interface S3Server {
  /** `s3://<bucket>/<prefix>` */
  url: string;
  endpoint: string;
  env: { BACKUP_S3_ENDPOINT: string; AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string; AWS_REGION: string };
  /**
   * The server stops answering (SIGSTOP): connections still open, requests
   * hang until the client's timeout, as with a stalled store. Nothing is lost.
   */
  suspend(): void;
  /** Answers again (SIGCONT), the requests that waited included. */
  resume(): void;
  /** Stops the server and removes its data. */
  close(): Promise<void>;
}

export async function startS3Server(bucket = "dbaas-backups", prefix = "test"): Promise<S3Server> {
  const directory = await mkdtemp(path.join(tmpdir(), "dbaas-s3rver-"));
  const child: ChildProcess = spawn(
    process.execPath,
    ["--openssl-legacy-provider", "--import", "tsx", "test/support/s3rver-process.ts", directory, bucket],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const port = await new Promise<number>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`s3rver not listening after 60 s: ${stderr}`)), 60_000);
    void exited.then(() => fail(new Error(`s3rver exited: ${stderr}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const m = /^listening (\d+)$/.exec(line);
      if (!m) return;
      clearTimeout(timer);
      ready(Number(m[1]));
    });
  }).catch(async (err: unknown) => {
    child.kill("SIGKILL");
    await rm(directory, { recursive: true, force: true });
    throw err;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    url: `s3://${bucket}/${prefix}`,
    endpoint,
    // s3rver's fixed credentials.
    env: { BACKUP_S3_ENDPOINT: endpoint, AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER", AWS_REGION: "us-east-1" },
    suspend() {
      child.kill("SIGSTOP");
    },
    resume() {
      child.kill("SIGCONT");
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGCONT");
        child.kill("SIGTERM");
        await exited;
      }
      await rm(directory, { recursive: true, force: true });
    },
  };
}
