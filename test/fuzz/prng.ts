/**
 * A small seeded PRNG (sfc32, seeded through splitmix32): the same seed gives
 * the same sequence of requests on every machine, so a failure found once is
 * found again with its FUZZ_SEED.
 */
export interface Rng {
  readonly seed: number;
  /** Uniform in [0, 1). */
  next(): number;
  /** Integer in [0, n). */
  int(n: number): number;
  /** Integer in [min, max]. */
  between(min: number, max: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** Picks by weight: `[[weight, value], …]`. */
  weighted<T>(items: ReadonlyArray<readonly [number, T]>): T;
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export function createRng(seed: number): Rng {
  const init = splitmix32(seed);
  let a = init();
  let b = init();
  let c = init();
  let d = init();
  const next = () => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) >>> 0;
    return t / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  const rng: Rng = {
    seed,
    next,
    int: (n) => Math.floor(next() * n),
    between: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)]!,
    weighted(items) {
      const total = items.reduce((sum, [w]) => sum + w, 0);
      let r = next() * total;
      for (const [w, value] of items) {
        r -= w;
        if (r < 0) return value;
      }
      return items[items.length - 1]![1];
    },
  };
  return rng;
}

/** FUZZ_SEED when set (decimal or 0x hex), else a fresh one (printed, so the run can be repeated). */
export function seedFromEnv(env: Record<string, string | undefined> = process.env, fallback?: number): number {
  const raw = env.FUZZ_SEED;
  if (raw !== undefined && raw !== "") {
    const seed = Number(raw);
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new Error(`FUZZ_SEED must be an integer 0..2^32-1, got ${raw}`);
    return seed;
  }
  return fallback ?? Math.floor(Math.random() * 0x100000000);
}
