// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Where the integration tests find Redis and PostgreSQL, and whether they run.
 *
 * A service that does not answer makes its tests ignored, with the reason in
 * the test's name; with `IDEMPOTENCY_REQUIRE_SERVICES=1` (as CI sets) they
 * run anyway, and fail.
 *
 * Tests that pause, kill or restart a server start one of their own here
 * (redis-server, PostgreSQL) on a free port, or cut a client off with a TCP
 * proxy, and stop it in `finally` (or with `await using`): the shared servers
 * are never touched.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { freePort, listening } from "./http.ts";
import { waitFor } from "./time.ts";

// Re-exported for the tests that take their services from here.
export { freePort, listening, waitFor };

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

// --- private servers ---------------------------------------------------------

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

/** Whether `redis-server` is on the PATH. */
export async function haveRedisServer(): Promise<boolean> {
  try {
    const { success } = await new Deno.Command("redis-server", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).output();
    return success;
  } catch {
    return false;
  }
}

/** Whether a Redis on a loopback port answers PING (not LOADING). */
async function pong(port: number): Promise<boolean> {
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      await conn.write(new TextEncoder().encode("PING\r\n"));
      const buffer = new Uint8Array(64);
      const n = await conn.read(buffer);
      return new TextDecoder().decode(buffer.subarray(0, n ?? 0))
        .startsWith("+PONG");
    } finally {
      conn.close();
    }
  } catch {
    return false;
  }
}

/** A redis-server started by a test: see {@linkcode startRedisServer}. */
export interface PrivateRedis extends AsyncDisposable {
  /** Its port. */
  readonly port: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** SIGSTOP: the server hangs, holding what was sent to it. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGKILL, as a crash; waits for the process to end. */
  kill(): Promise<void>;
  /**
   * Starts it again on the same port (killed first if it runs), empty unless
   * `appendonly`, and waits until it answers PING.
   */
  restart(): Promise<void>;
  /**
   * Runs one command with `redis-cli` on a connection of its own (the
   * server must not be paused), for example `CLIENT KILL TYPE normal`.
   */
  cli(...args: string[]): Promise<string>;
  /** Kills it (resumed first) and removes its directory. Idempotent. */
  stop(): Promise<void>;
  /** The same as {@linkcode PrivateRedis.stop}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts a redis-server of the test's own on a free port, with no
 * persistence unless `appendonly` (then an AOF in a temp dir that survives
 * {@linkcode PrivateRedis.restart}, fsynced on every write so that a restart
 * keeps every acknowledged write). Call `stop()` in `finally`, or hold it
 * with `await using`.
 *
 * @param options Whether to keep an append-only file.
 * @returns The running server.
 */
export async function startRedisServer(
  options: { appendonly?: boolean } = {},
): Promise<PrivateRedis> {
  const port = freePort();
  const dir = await Deno.makeTempDir({ prefix: "idem-redis-" });
  let child: Deno.ChildProcess | undefined;
  const spawn = async () => {
    child = new Deno.Command("redis-server", {
      args: [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        options.appendonly ? "yes" : "no",
        "--appendfsync",
        "always",
        "--daemonize",
        "no",
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
    // PING, not only a connection: with an AOF, the server refuses commands
    // while it loads the file.
    await waitFor(`redis-server on ${port} to answer PING`, () => pong(port));
  };
  const signal = (name: Deno.Signal) => {
    try {
      child?.kill(name);
    } catch { /* already gone */ }
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (c === undefined) return;
    try {
      c.kill("SIGCONT");
      c.kill("SIGKILL");
    } catch { /* already gone */ }
    await c.status;
  };
  const stop = async () => {
    await kill();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    await spawn();
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    pause: () => signal("SIGSTOP"),
    resume: () => signal("SIGCONT"),
    kill,
    async restart() {
      await kill();
      await spawn();
    },
    async cli(...args: string[]) {
      const out = await new Deno.Command("redis-cli", {
        args: ["-p", String(port), ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      if (!out.success) {
        throw new Error(new TextDecoder().decode(out.stderr));
      }
      return new TextDecoder().decode(out.stdout).trim();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** A PostgreSQL cluster started by a test: see {@linkcode startPostgresServer}. */
export interface PrivatePostgres {
  /** Its port. */
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  /** Stops it at once (SIGQUIT), keeping its data: the server is down. */
  halt(): Promise<void>;
  /** Starts it again on the same port and data (halted first if it runs). */
  restart(): Promise<void>;
  /** Stops it at once (SIGQUIT) and removes its data directory. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a PostgreSQL cluster of the test's own on a free port: `initdb`
 * into a temp dir and `postgres` run as the `postgres` user (binaries from
 * `pg_config --bindir`), trust authentication, no fsync. Call `stop()` in
 * `finally`. Backends of this cluster may be paused with
 * `Deno.kill(pid, "SIGSTOP")`; never do that to the shared server.
 *
 * @returns The running cluster.
 */
export async function startPostgresServer(): Promise<PrivatePostgres> {
  const bin = new TextDecoder().decode(
    (await new Deno.Command("pg_config", { args: ["--bindir"] }).output())
      .stdout,
  ).trim();
  const dir = await Deno.makeTempDir({ prefix: "idem-pg-" });
  // PostgreSQL refuses to run as root: as root, run it as `postgres`.
  const uid = new TextDecoder().decode(
    (await new Deno.Command("id", { args: ["-u"] }).output()).stdout,
  ).trim();
  const run = (
    program: string,
    args: string[],
    stderr: "piped" | "null" = "piped",
  ) =>
    uid === "0"
      ? new Deno.Command("setpriv", {
        args: [
          "--reuid=postgres",
          "--regid=postgres",
          "--init-groups",
          "--",
          program,
          ...args,
        ],
        stdout: "null",
        stderr,
      })
      : new Deno.Command(program, { args, stdout: "null", stderr });
  let child: Deno.ChildProcess | undefined;
  const halt = async () => {
    const c = child;
    child = undefined;
    if (c !== undefined) {
      try {
        c.kill("SIGQUIT");
      } catch { /* already gone */ }
      await c.status;
    }
  };
  const stop = async () => {
    await halt();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    if (uid === "0") {
      await new Deno.Command("chown", { args: ["postgres", dir] }).output();
    }
    const init = await run(`${bin}/initdb`, [
      "-D",
      `${dir}/data`,
      "-A",
      "trust",
      "-U",
      "postgres",
      "-E",
      "UTF8",
      "--no-sync",
    ]).output();
    if (!init.success) {
      throw new Error(
        `initdb failed: ${new TextDecoder().decode(init.stderr)}`,
      );
    }
    const port = freePort();
    const ready = async () =>
      (await new Deno.Command(`${bin}/pg_isready`, {
        args: ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres"],
        stdout: "null",
        stderr: "null",
      }).output()).success;
    const start = async () => {
      child = run(`${bin}/postgres`, [
        "-D",
        `${dir}/data`,
        "-p",
        String(port),
        "-k",
        dir,
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",
      ], "null").spawn();
      await waitFor(`postgres on ${port}`, ready, 15_000);
    };
    await start();
    return {
      port,
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      halt,
      async restart() {
        await halt();
        await start();
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A loopback TCP proxy started by a test: see {@linkcode startTcpProxy}. */
export interface TcpProxy {
  /** The port clients connect to. */
  readonly port: number;
  /**
   * Drops every open connection and refuses new ones until
   * {@linkcode TcpProxy.unblock}: the client is disconnected and cannot get
   * back, while the server behind keeps running.
   */
  block(): void;
  /** Listens and forwards again, on the same port. */
  unblock(): void;
  /** Stops listening and drops every connection. Idempotent. */
  close(): void;
}

/**
 * Starts a TCP proxy on a free loopback port in front of `targetPort`, to
 * cut a client off from a server that keeps running (which SIGSTOP or a
 * restart cannot do).
 *
 * @param targetPort The server's port on 127.0.0.1.
 * @returns The running proxy.
 */
export function startTcpProxy(targetPort: number): TcpProxy {
  const open = new Set<Deno.Conn>();
  let listener: Deno.Listener | undefined;
  const shut = (conn: Deno.Conn) => {
    open.delete(conn);
    try {
      conn.close();
    } catch { /* closed already */ }
  };
  const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
    try {
      await from.readable.pipeTo(to.writable, { preventClose: true });
    } catch { /* either side went away */ }
    shut(from);
    shut(to);
  };
  const serve = (port: number) => {
    const current = Deno.listen({ hostname: "127.0.0.1", port });
    listener = current;
    (async () => {
      for await (const conn of current) {
        open.add(conn);
        Deno.connect({ hostname: "127.0.0.1", port: targetPort }).then(
          (upstream) => {
            if (listener !== current || !open.has(conn)) {
              return upstream.close();
            }
            open.add(upstream);
            pipe(conn, upstream);
            pipe(upstream, conn);
          },
          () => shut(conn),
        );
      }
    })().catch(() => {});
    return (current.addr as Deno.NetAddr).port;
  };
  const stop = () => {
    const current = listener;
    listener = undefined;
    try {
      current?.close();
    } catch { /* closed already */ }
    for (const conn of [...open]) shut(conn);
  };
  const port = serve(0);
  return {
    port,
    block: stop,
    unblock() {
      if (listener === undefined) serve(port);
    },
    close: stop,
  };
}
