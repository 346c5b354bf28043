import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const file = join(resolve(dirname(fileURLToPath(import.meta.url)), "../.."), "docs/benchmarks.md");

export function summary(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.max(0, Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1))]!;
  return { p50: at(50), p95: at(95), min: s[0]!, max: s[s.length - 1]! };
}

export const fmt = (n: number) => n.toFixed(0);

/** Replaces (or appends) the `## <title> (<date>)` section of docs/benchmarks.md. */
export async function writeSection(title: string, body: string): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    text = "# Benchmarks\n\nNumbers printed by the bench scripts; each section is rewritten by its script.\n";
  }
  const start = text.indexOf(`## ${title}`);
  if (start >= 0) {
    const next = text.indexOf("\n## ", start + 1);
    text = text.slice(0, start) + (next >= 0 ? text.slice(next + 1) : "");
  }
  const date = new Date().toISOString().slice(0, 10);
  await writeFile(file, `${text.trimEnd()}\n\n## ${title} (${date})\n\n${body}\n`);
}

/** Runs a bench's main and exits: 0 when it finished, 1 with the stack when it failed. */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench failed: ${(err as Error).stack}\n`);
      process.exit(1);
    },
  );
}

const benchStart = performance.now();
/** A progress line, stamped with the seconds since the bench started. */
export const benchLog = (line: string) =>
  process.stdout.write(`[${((performance.now() - benchStart) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
/** Milliseconds as seconds with one decimal. */
export const secs = (ms: number) => (ms / 1000).toFixed(1);

/** A client as the customer connects (TLS, the API's credentials), kept open for many statements. */
export { connectCustomer } from "../support/pgclient.ts";
