// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Where the integration tests find Redis and PostgreSQL, and whether they run.
 *
 * A service that does not answer makes its tests ignored, with the reason in
 * the test's name; with `IDEMPOTENCY_REQUIRE_SERVICES=1` (as CI sets) they
 * run anyway, and fail.
 *
 * @module
 */

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
