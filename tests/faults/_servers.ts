// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * App processes of the fault-injection suite, which print their port when
 * they listen; each is stopped by the test that started it, in `finally`,
 * never by name. The private redis-server these tests pause, kill and restart
 * is `startRedisServer` of `tests/_support/services.ts`.
 *
 * @module
 */

// Where it lived before tests/_support/services.ts: kept for the files that import it from here.
export { haveRedisServer } from "../_support/services.ts";

/**
 * The test's own control server on a free port: app processes report to it
 * with query parameters, and its `answer` may hold them there until the
 * test's word.
 */
export abstract class ControlServer {
  readonly server: Deno.HttpServer<Deno.NetAddr>;

  constructor() {
    this.server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      (req) => {
        const url = new URL(req.url);
        return this.answer(
          (name) => url.searchParams.get(name) ?? "",
          url.pathname,
        );
      },
    );
  }

  /** Answers one report: `q` reads its parameters, `path` is its path. */
  protected abstract answer(
    q: (name: string) => string,
    path: string,
  ): Response | Promise<Response>;

  get url(): string {
    return `http://127.0.0.1:${this.server.addr.port}`;
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

  /** `flags` are more permissions: `["--allow-write"]` for an SQLite file. */
  constructor(
    script: string,
    args: string[],
    env: Record<string, string>,
    flags: string[] = [],
  ) {
    this.child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        ...flags,
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
