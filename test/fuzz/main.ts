/**
 * `npm run fuzz`: starts a stack (test/support/stack.ts, Redis at REDIS_URL),
 * sends FUZZ_REQUESTS (default 11,000) generated requests and exits 1 on any
 * failure. FUZZ_SEED repeats a run; FUZZ_ONLY=<index> sends only that request
 * of the run; FUZZ_CONCURRENCY (8) requests in flight; FUZZ_LOG=<file> keeps what
 * the stack printed.
 */
import { writeFile } from "node:fs/promises";
import { startFixture } from "./fixture.ts";
import { seedFromEnv } from "./prng.ts";
import { coverage, runFuzz, summarize } from "./run.ts";

const int = (name: string, fallback: number) => {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${raw}`);
  return n;
};

const seed = seedFromEnv();
const requests = int("FUZZ_REQUESTS", 11_000);
const only = process.env.FUZZ_ONLY ? int("FUZZ_ONLY", 0) : undefined;
console.log(`fuzz: seed ${seed}, ${requests} requests; starting a stack…`);
const fixture = await startFixture();
let failed = true;
try {
  console.log(`fuzz: stack at ${fixture.baseUrl}`);
  for (const m of fixture.missing) console.log(`fuzz: fixture without ${m}`);
  const report = await runFuzz(fixture, { seed, requests, only, concurrency: int("FUZZ_CONCURRENCY", 8) });
  console.log(`\nstatuses per operation:\n${coverage(report)}`);
  console.log(`\n${summarize(report)}`);
  const errors = fixture
    .output()
    .split("\n")
    .filter((l) => /\| (?:ERROR|FATAL) /.test(l));
  if (errors.length > 0) {
    // Grouped by service and error (paths and ids vary), each with one example line.
    const groups = new Map<string, { count: number; example: string }>();
    for (const line of errors) {
      const key = `${line.split("|")[0]!.trim()} ${/\berror=(.{0,120})/.exec(line)?.[1] ?? line.slice(0, 120)}`.replace(/\s+stack=.*/, "");
      const g = groups.get(key) ?? { count: 0, example: line.slice(0, 300) };
      g.count++;
      groups.set(key, g);
    }
    console.log(`\nthe stack logged ${errors.length} error lines:`);
    for (const [key, g] of [...groups].sort((a, b) => b[1].count - a[1].count).slice(0, 20))
      console.log(`  ${g.count}× ${key}\n      e.g. ${g.example}`);
  }
  if (process.env.FUZZ_LOG) await writeFile(process.env.FUZZ_LOG, fixture.output());
  const broken = await fixture.check();
  for (const b of broken) console.log(`fuzz: the run broke the fixture: ${b}`);
  failed = report.failures.length > 0 || broken.length > 0;
} finally {
  await fixture.close();
}
process.exit(failed ? 1 : 0);
