// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Private servers of the fault-injection suite: a `redis-server` the test
 * starts on a free port and may pause, kill and restart, and app processes
 * that print their port when they listen. Every one is stopped by the test
 * that started it, in `finally`, never by name.
 *
 * @module
 */

/** A loopback port nobody listened on at the time of asking. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

async function listening(port: number): Promise<boolean> {
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port })).close();
    return true;
  } catch {
    return false;
  }
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

/**
 * A redis-server of the test's own on a free port, in a temp dir: without
 * persistence (a restart is empty) or with an append-only file fsynced on
 * every write (a restart keeps every acknowledged write).
 */
export class PrivateRedis {
  readonly port: number;
  readonly aof: boolean;
  #dir: string | undefined;
  #child: Deno.ChildProcess | undefined;
  #paused = false;

  constructor(options: { aof?: boolean } = {}) {
    this.port = freePort();
    this.aof = options.aof ?? false;
  }

  /** The URL of the server. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts it (again, after {@linkcode PrivateRedis.kill}), and waits until it listens. */
  async start(): Promise<void> {
    this.#dir ??= await Deno.makeTempDir({ prefix: "faults-redis-" });
    const args = [
      "--port",
      String(this.port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--dir",
      this.#dir,
      "--daemonize",
      "no",
      "--appendonly",
      this.aof ? "yes" : "no",
    ];
    if (this.aof) args.push("--appendfsync", "always");
    this.#child = new Deno.Command("redis-server", {
      args,
      stdout: "null",
      stderr: "null",
    }).spawn();
    const end = Date.now() + 20_000;
    while (!(await listening(this.port))) {
      if (Date.now() > end) {
        throw new Error(`redis-server did not listen on ${this.port}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    // With AOF, the server refuses commands while it loads the file.
    if (this.aof) await this.#ping();
  }

  async #ping(): Promise<void> {
    const end = Date.now() + 20_000;
    while (Date.now() < end) {
      try {
        const conn = await Deno.connect({
          hostname: "127.0.0.1",
          port: this.port,
        });
        try {
          await conn.write(new TextEncoder().encode("PING\r\n"));
          const buffer = new Uint8Array(64);
          const n = await conn.read(buffer);
          const reply = new TextDecoder().decode(buffer.subarray(0, n ?? 0));
          if (reply.startsWith("+PONG")) return;
        } finally {
          conn.close();
        }
      } catch { /* not yet */ }
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`redis-server on ${this.port} did not answer PING`);
  }

  /** Freezes the server (SIGSTOP): connections stay open, nothing answers. */
  pause(): void {
    this.#child?.kill("SIGSTOP");
    this.#paused = true;
  }

  /** Thaws a paused server (SIGCONT). */
  resume(): void {
    if (!this.#paused) return;
    this.#child?.kill("SIGCONT");
    this.#paused = false;
  }

  /** Kills the server at once (SIGKILL), as a crash would. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (child === undefined) return;
    try {
      if (this.#paused) child.kill("SIGCONT");
      this.#paused = false;
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
  }

  /** Kills the server and removes its directory. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
    if (this.#dir !== undefined) {
      await Deno.remove(this.#dir, { recursive: true }).catch(() => {});
    }
  }
}

/**
 * A child process that prints `listening <port>` once it listens: spawned,
 * waited for by that line, paused, resumed and killed by the test.
 */
export class AppProcess {
  readonly child: Deno.ChildProcess;
  readonly port: Promise<number>;
  #paused = false;

  constructor(script: string, args: string[], env: Record<string, string>) {
    this.child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        script,
        ...args,
      ],
      env,
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.port = readPort(this.child.stdout);
  }

  /** SIGSTOP: the process is frozen mid-whatever. */
  pause(): void {
    this.child.kill("SIGSTOP");
    this.#paused = true;
  }

  /** SIGCONT. */
  resume(): void {
    if (!this.#paused) return;
    this.child.kill("SIGCONT");
    this.#paused = false;
  }

  /** SIGKILL, and waits for the exit. */
  async kill(): Promise<void> {
    try {
      if (this.#paused) this.child.kill("SIGCONT");
      this.#paused = false;
      this.child.kill("SIGKILL");
    } catch { /* already gone */ }
    await this.child.status;
  }
}

async function readPort(stdout: ReadableStream<Uint8Array>): Promise<number> {
  const lines = stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  for (;;) {
    const { done, value } = await lines.read();
    if (done) throw new Error(`the app exited before listening: ${text}`);
    text += value;
    const match = /listening (\d+)\n/.exec(text);
    if (match) {
      // Keep draining, so the child never blocks on a full pipe.
      (async () => {
        try {
          while (!(await lines.read()).done) { /* drain */ }
        } catch { /* gone */ }
      })();
      return Number(match[1]);
    }
  }
}
