import { existsSync } from "node:fs";
import pg from "pg";
import { randomToken } from "@dbaas/kit";

/**
 * The PostgreSQL server tests run against: TEST_DATABASE_URL or DATABASE_URL,
 * else the local server on 127.0.0.1:5432. Where a Docker engine is reachable
 * and neither is set, a throwaway server is started with testcontainers.
 */
let serverUrl: Promise<string> | undefined;

export function testServerUrl(): Promise<string> {
  serverUrl ??= (async () => {
    const fromEnv = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
    if (fromEnv) return fromEnv;
    if (existsSync("/var/run/docker.sock") && process.env.TESTCONTAINERS !== "0") {
      const { GenericContainer, Wait } = await import("testcontainers");
      const c = await new GenericContainer("postgres:17")
        .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: "trust" })
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage(/ready to accept connections/, 2))
        .start();
      return `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/postgres`;
    }
    return "postgres://postgres@127.0.0.1:5432/postgres";
  })();
  return serverUrl;
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh, empty database for one test file; `drop()` removes it. */
export async function createTestDatabase(prefix = "t"): Promise<TestDatabase> {
  const server = await testServerUrl();
  const name = `${prefix}_${randomToken(10)}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: server });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
