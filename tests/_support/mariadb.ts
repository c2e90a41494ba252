// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Where the MysqlStore tests find MySQL/MariaDB (`MYSQL_URL`), whether they
 * run (ignored with the reason when unreachable; failing under
 * IDEMPOTENCY_REQUIRE_SERVICES=1), and a private `mariadbd` for the tests
 * that pause or kill a server: the shared one is never touched.
 *
 * @module
 */

import mysql from "mysql2/promise";
import { freePort, ignoreUnless, REQUIRE_SERVICES } from "./services.ts";
import { waitFor } from "./time.ts";

/** The database the tests use: `MYSQL_URL`, or the local default. */
export const MYSQL_URL: string = Deno.env.get("MYSQL_URL") ??
  "mysql://root@127.0.0.1:3306/test";

/** Whether the MySQL tests are ignored, and why. */
export const MYSQL_IGNORE: false | string = await ignoreUnless(
  "MySQL",
  MYSQL_URL,
  3306,
  "MYSQL_URL",
);

/** A mysql2 pool on `url` (default {@linkcode MYSQL_URL}). */
export function mysqlPool(
  options: mysql.PoolOptions = {},
  url: string = MYSQL_URL,
): mysql.Pool {
  return mysql.createPool({ uri: url, connectionLimit: 4, ...options });
}

/** Whether `mariadbd` and `mariadb-install-db` are installed (or required). */
export async function mariadbServerIgnore(): Promise<false | string> {
  if (REQUIRE_SERVICES) return false;
  try {
    const { success } = await new Deno.Command("mariadbd", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).output();
    return success ? false : "mariadbd does not run";
  } catch {
    return "mariadbd is not installed";
  }
}

/** A mariadbd started by a test: see {@linkcode startMariadbServer}. */
export interface PrivateMariadb extends AsyncDisposable {
  /** Its port. */
  readonly port: number;
  /** `mysql://root@127.0.0.1:<port>/test`. */
  readonly url: string;
  /** SIGSTOP: the server hangs, holding what was sent to it. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGKILL, as a crash; waits for the process to end. */
  kill(): Promise<void>;
  /** Starts it again on the same data (killed first if it runs). */
  restart(): Promise<void>;
  /** Kills it (resumed first) and removes its directory. Idempotent. */
  stop(): Promise<void>;
  /** The same as {@linkcode PrivateMariadb.stop}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}

async function run(program: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(program, {
    args,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(
      `${program} failed: ${new TextDecoder().decode(out.stderr).slice(-2000)}`,
    );
  }
}

async function answers(port: number): Promise<boolean> {
  const conn = await mysql.createConnection({
    host: "127.0.0.1",
    port,
    user: "root",
    connectTimeout: 1000,
  }).catch(() => undefined);
  if (conn === undefined) return false;
  try {
    await conn.query("CREATE DATABASE IF NOT EXISTS test");
    return true;
  } catch {
    return false;
  } finally {
    conn.destroy();
  }
}

/**
 * Starts a mariadbd of the test's own on a free port: `mariadb-install-db`
 * into a temp dir, then `mariadbd --skip-grant-tables` (root, no password)
 * with a durable log (`innodb_flush_log_at_trx_commit=1`), so a SIGKILL
 * keeps every commit; creates database `test`. Call `stop()` in `finally`,
 * or hold it with `await using`.
 *
 * @returns The running server.
 */
export async function startMariadbServer(): Promise<PrivateMariadb> {
  // As root, mariadbd runs only when told to (`id`: Deno.uid() needs --allow-sys).
  const uid = new TextDecoder().decode(
    (await new Deno.Command("id", { args: ["-u"] }).output()).stdout,
  ).trim();
  const root = uid === "0" ? ["--user=root"] : [];
  const dir = await Deno.makeTempDir({ prefix: "idem-mariadb-" });
  const port = freePort();
  let child: Deno.ChildProcess | undefined;
  const spawn = async () => {
    child = new Deno.Command("mariadbd", {
      args: [
        "--no-defaults",
        `--datadir=${dir}/data`,
        `--port=${port}`,
        "--bind-address=127.0.0.1",
        `--socket=${dir}/s.sock`,
        `--pid-file=${dir}/p.pid`,
        "--skip-grant-tables",
        "--skip-log-bin",
        "--innodb-flush-log-at-trx-commit=1",
        "--innodb-buffer-pool-size=32M",
        ...root,
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
    await waitFor(`mariadbd on ${port}`, () => answers(port), 30_000);
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
  const signal = (name: Deno.Signal) => {
    try {
      child?.kill(name);
    } catch { /* already gone */ }
  };
  const stop = async () => {
    await kill();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    await run("mariadb-install-db", [
      "--no-defaults",
      `--datadir=${dir}/data`,
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      ...root,
    ]);
    await spawn();
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    port,
    url: `mysql://root@127.0.0.1:${port}/test`,
    pause: () => signal("SIGSTOP"),
    resume: () => signal("SIGCONT"),
    kill,
    async restart() {
      await kill();
      await spawn();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
