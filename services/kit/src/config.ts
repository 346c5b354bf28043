/**
 * Reading configuration from the environment. Services call these from their
 * `config.ts` once at start-up and fail fast with a message naming the variable.
 */
export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

/** A required setting; throws ConfigError naming the variable when unset or empty. */
export function requireEnv(env: Env, name: string): string {
  const value = env[name];
  if (value === undefined || value === "") {
    throw new ConfigError(`missing required environment variable ${name}`);
  }
  return value;
}

/** An optional string setting with a default. */
export function envString(env: Env, name: string, fallback: string): string {
  const value = env[name];
  return value === undefined || value === "" ? fallback : value;
}

/** An optional integer setting; a value that is not an integer is a ConfigError. */
export function envInt(env: Env, name: string, fallback: number): number {
  const value = env[name];
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n)) {
    throw new ConfigError(`environment variable ${name} must be an integer, got "${value}"`);
  }
  return n;
}

/** A comma-separated list setting. */
export function envList(env: Env, name: string, fallback: string[]): string[] {
  const value = env[name];
  if (value === undefined || value === "") return fallback;
  return value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}
