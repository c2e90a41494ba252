// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Where the integration tests find Redis and PostgreSQL, and whether they run.
 *
 * A service that does not answer makes its tests ignored, with the reason in
 * the test's name; with `IDEMPOTENCY_REQUIRE_SERVICES=1` (as CI sets) they
 * run anyway, and fail. On the shared servers a test keeps to a key prefix
 * ({@linkcode uniquePrefix}) or a PostgreSQL schema ({@linkcode
 * postgresSchema}) of its own.
 *
 * Tests that pause, kill or restart a server start one of their own
 * (redis-server, PostgreSQL) or cut a client off with a TCP proxy:
 * `private_servers.ts`.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { freePort, listening } from "./http.ts";
import { waitFor } from "./time.ts";
import { haveRedisServer } from "./private_servers.ts";

// Re-exported for the tests that take their services from here.
export { freePort, listening, waitFor };

// The private servers moved to `private_servers.ts` (issue 30). Re-exported
// from here until the branches written against the old file are merged;
// new tests import them from `private_servers.ts`.
export {
  haveRedisServer,
  type PrivatePostgres,
  type PrivateRedis,
  startPostgresServer,
  startRedisServer,
  startTcpProxy,
  type TcpProxy,
} from "./private_servers.ts";

/** The Redis the tests use: `REDIS_URL`, or the local default. */
export const REDIS_URL: string = Deno.env.get("REDIS_URL") ??
  "redis://127.0.0.1:6379";

/** The PostgreSQL database the tests use: `DATABASE_URL`, or the local default. */
export const DATABASE_URL: string = Deno.env.get("DATABASE_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";

/** Whether unreachable services fail the tests instead of skipping them. */
export const REQUIRE_SERVICES: boolean =
  Deno.env.get("IDEMPOTENCY_REQUIRE_SERVICES") === "1";

/**
 * Opens and closes a TCP connection to the URL's host and port, within a
 * second.
 *
 * @param url The service URL.
 * @param defaultPort The port when the URL names none.
 * @returns Whether something listens there.
 */
export async function reachable(
  url: string,
  defaultPort: number,
): Promise<boolean> {
  const { hostname, port } = new URL(url);
  const host = hostname.replace(/^\[|\]$/g, "") || "127.0.0.1";
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const connecting = Deno.connect({
      hostname: host,
      port: port ? Number(port) : defaultPort,
    });
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("timed out")), 1000);
    });
    const conn = await Promise.race([connecting, timeout]);
    conn.close();
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Decides whether a service's tests run: `false` (run them) when the service
 * answers or is required, else the reason they are ignored.
 *
 * @param name The service's name, for the reason.
 * @param url The service URL.
 * @param defaultPort The port when the URL names none.
 * @param variable The environment variable that sets the URL.
 * @returns `false`, or the reason.
 */
export async function ignoreUnless(
  name: string,
  url: string,
  defaultPort: number,
  variable: string,
): Promise<false | string> {
  if (REQUIRE_SERVICES || await reachable(url, defaultPort)) return false;
  const shown = new URL(url);
  shown.password = "";
  return `${name} is unreachable at ${shown.host}; start it or set ${variable} (IDEMPOTENCY_REQUIRE_SERVICES=1 makes this a failure)`;
}

/** Whether the Redis tests are ignored, and why. */
export const REDIS_IGNORE: false | string = await ignoreUnless(
  "Redis",
  REDIS_URL,
  6379,
  "REDIS_URL",
);

/** Whether the PostgreSQL tests are ignored, and why. */
export const POSTGRES_IGNORE: false | string = await ignoreUnless(
  "PostgreSQL",
  DATABASE_URL,
  5432,
  "DATABASE_URL",
);

/**
 * Names a test, adding the reason when it is ignored.
 *
 * @param name The test's name.
 * @param ignore `false`, or the reason.
 * @returns The name to give `Deno.test`.
 */
export function testName(name: string, ignore: false | string): string {
  return ignore ? `${name} (ignored: ${ignore})` : name;
}

/**
 * A prefix unique to this test run, so runs never see each other's keys.
 *
 * @param label What the prefix is for.
 * @returns A short unique string.
 */
export function uniquePrefix(label: string): string {
  return `${label}_${Date.now().toString(36)}_${
    crypto.randomUUID().slice(0, 8)
  }`;
}

/**
 * A test that needs services: ignored, with the reason in its name, when
 * `ignore` is a reason. The op and resource sanitizers are off unless
 * `sanitize`, because node-redis and postgres.js keep sockets and timers of
 * their own for a while after they close.
 *
 * @param name The test's name.
 * @param ignore `false`, or the reason (for example {@linkcode REDIS_IGNORE}).
 * @param fn The test.
 * @param options Whether the sanitizers stay on.
 */
export function integrationTest(
  name: string,
  ignore: false | string,
  fn: () => Promise<void>,
  options: { sanitize?: boolean } = {},
): void {
  const sanitize = options.sanitize ?? false;
  Deno.test({
    name: testName(name, ignore),
    ignore: ignore !== false,
    sanitizeOps: sanitize,
    sanitizeResources: sanitize,
    fn,
  });
}

/** A schema of one test's own in the shared database: see {@linkcode postgresSchema}. */
export interface TestSchema extends AsyncDisposable {
  /** A postgres.js pool on {@linkcode DATABASE_URL}. */
  readonly sql: postgres.Sql;
  /** The schema's name (unique to this run). */
  readonly schema: string;
  /** Drops the schema with everything in it and ends the pool. */
  drop(): Promise<void>;
}

/**
 * Opens a pool on the shared database and creates a schema of the test's
 * own (unless `create` is false: a test of `migrate()` creates it), so that
 * runs never see each other's tables. Call `drop()` in `finally`, or hold it
 * with `await using`.
 *
 * @param label What the schema is for.
 * @param options The pool size, and whether to create the schema.
 * @returns The pool and the schema.
 */
export async function postgresSchema(
  label: string,
  options: { max?: number; create?: boolean } = {},
): Promise<TestSchema> {
  const sql = postgres(DATABASE_URL, {
    max: options.max ?? 4,
    onnotice: () => {},
  });
  const schema = uniquePrefix(label);
  const drop = async () => {
    try {
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await sql.end();
    }
  };
  try {
    if (options.create ?? true) await sql.unsafe(`CREATE SCHEMA "${schema}"`);
  } catch (error) {
    await sql.end();
    throw error;
  }
  return { sql, schema, drop, [Symbol.asyncDispose]: drop };
}

/**
 * A migrated PostgresStore on `<schema>.keys` in a schema of the test's own
 * (see {@linkcode postgresSchema}); `drop()` removes both.
 *
 * @param label What the schema is for.
 * @param options The pool size.
 * @returns The store, its pool and schema.
 */
export async function postgresStore(
  label: string,
  options: { max?: number } = {},
): Promise<TestSchema & { store: PostgresStore }> {
  const pg = await postgresSchema(label, options);
  try {
    const store = new PostgresStore({
      sql: pg.sql,
      table: `${pg.schema}.keys`,
    });
    await store.migrate();
    return { ...pg, store };
  } catch (error) {
    await pg.drop();
    throw error;
  }
}

/**
 * Whether the tests on a private redis-server are ignored, and why: `false`
 * when `redis-server` is installed or IDEMPOTENCY_REQUIRE_SERVICES=1 makes
 * them required.
 */
export async function redisServerIgnore(): Promise<false | string> {
  return REQUIRE_SERVICES || await haveRedisServer()
    ? false
    : "redis-server is not installed";
}
