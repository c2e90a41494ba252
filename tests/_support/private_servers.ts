// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Servers of a test's own, for the tests that pause, kill or restart one:
 * a redis-server ({@linkcode startRedisServer}) or a PostgreSQL cluster
 * ({@linkcode startPostgresServer}) on a free port, and a loopback TCP proxy
 * ({@linkcode startTcpProxy}) that cuts a client off. Each is stopped in
 * `finally` (or with `await using`): the shared servers are never touched.
 * Whether such a test runs is decided in `services.ts`
 * (`redisServerIgnore`).
 *
 * @module
 */

import { freePort } from "./http.ts";
import { waitFor } from "./time.ts";

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

/** A private server exited before it answered: its port was taken. */
class PortTaken extends Error {
  constructor(port: number) {
    super(`the server on port ${port} exited before answering: port taken`);
  }
}

/** The pid the Redis on a loopback port reports (`INFO server`), if any. */
async function serverPid(port: number): Promise<number | undefined> {
  const out = await new Deno.Command("redis-cli", {
    args: ["-p", String(port), "INFO", "server"],
    stdout: "piped",
    stderr: "null",
  }).output();
  const pid = /process_id:(\d+)/.exec(new TextDecoder().decode(out.stdout));
  return pid ? Number(pid[1]) : undefined;
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
  // freePort() closes its listener before redis-server binds the port, so
  // another test (under `--parallel`, another file's) may take it in between:
  // then this server exits, and a PING could be answered by the other one.
  // So the server must answer as our child's pid, or the start is retried on
  // a new port (a restart keeps its port: clients reconnect to it).
  let port = freePort();
  const dir = await Deno.makeTempDir({ prefix: "idem-redis-" });
  let child: Deno.ChildProcess | undefined;
  const spawn = async () => {
    const started = child = new Deno.Command("redis-server", {
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
    let exited = false;
    started.status.then(() => exited = true);
    // PING, not only a connection: with an AOF, the server refuses commands
    // while it loads the file.
    await waitFor(`redis-server on ${port} to answer PING`, async () => {
      if (exited) throw new PortTaken(port);
      return await pong(port) && await serverPid(port) === started.pid;
    });
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
    for (let attempt = 1;; attempt++) {
      try {
        await spawn();
        break;
      } catch (error) {
        if (!(error instanceof PortTaken) || attempt === 3) throw error;
        await kill();
        port = freePort();
      }
    }
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
