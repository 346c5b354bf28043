/**
 * `npm run fuzz`: starts a stack (test/support/stack.ts, Redis at REDIS_URL),
 * sends FUZZ_REQUESTS (default 11,000) generated requests and exits 1 on any
 * failure. FUZZ_SEED repeats a run; FUZZ_ONLY=<index> sends only that request
 * of the run; FUZZ_CONCURRENCY (8) requests in flight.
 */
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
  const errors = fixture.output().split("\n").filter((l) => /\| (?:ERROR|FATAL) /.test(l));
  if (errors.length > 0) {
    console.log(`\nthe stack logged ${errors.length} error lines; distinct ones:`);
    for (const l of [...new Set(errors.map((e) => e.replace(/\b(req|db|org|user|member|key)[-_][a-z0-9]+/g, "$1-…").slice(0, 300)))].slice(0, 20)) console.log(`  ${l}`);
  }
  const broken = await fixture.check();
  for (const b of broken) console.log(`fuzz: the run broke the fixture: ${b}`);
  failed = report.failures.length > 0 || broken.length > 0;
} finally {
  await fixture.close();
}
process.exit(failed ? 1 : 0);
