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

/** The shortest secret a production deployment may use, in bytes. */
export const MIN_SECRET_BYTES = 32;

/**
 * Values shipped in this repository as examples or development defaults
 * (docker-compose.yml before its `.env`, deploy/k8s/secrets.env.example,
 * .env.example, READMEs, the tests' backup key). A production deployment that
 * kept one has a secret everyone knows. `secrets.test.ts` scans the shipped
 * files and fails when one of theirs is missing here.
 */
export const EXAMPLE_SECRETS: ReadonlySet<string> = new Set([
  "dev-only-internal-auth-secret-do-not-deploy",
  "dev-only-agent-replication-secret-do-not-deploy",
  "dbaas-dev-only",
  "replace-with-a-long-random-secret",
  "replace-with-another-long-random-secret",
  "replace-with-the-output-of-openssl-rand-base64-32",
  "replace-me",
  "sk_test_replace-me",
  "ZGJhYXMtYmFja3VwLXRlc3QtbWFzdGVyLWtleS0zMmI=",
]);

/** Whether the process runs as a production deployment (`NODE_ENV=production`). */
export const isProduction = (env: Env) => env.NODE_ENV === "production";

/**
 * A required secret. With NODE_ENV=production it must be at least
 * MIN_SECRET_BYTES long and none of the repository's example values: a
 * service refuses to start rather than run with a guessable secret. The
 * message names the variable, never the value.
 */
export function requireSecret(env: Env, name: string): string {
  const value = requireEnv(env, name);
  if (!isProduction(env)) return value;
  if (EXAMPLE_SECRETS.has(value.trim())) {
    throw new ConfigError(
      `${name} is an example value from the repository; with NODE_ENV=production set a random one (npm run env:generate)`,
    );
  }
  if (Buffer.byteLength(value, "utf8") < MIN_SECRET_BYTES) {
    throw new ConfigError(
      `${name} is shorter than ${MIN_SECRET_BYTES} bytes; with NODE_ENV=production set a random one (npm run env:generate)`,
    );
  }
  return value;
}
