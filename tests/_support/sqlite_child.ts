// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The SqliteStore tests' other processes: `deno run` children that talk
 * over stdin and stdout, line by line (`sqlite_claimer.ts`, `sqlite_locker.ts`).
 *
 * @module
 */

/** The path of a script in tests/_support. */
export const support = (name: string): string =>
  new URL(`./${name}`, import.meta.url).pathname;

/** A `deno run` child with piped stdin and stdout, read line by line. */
export class Child implements AsyncDisposable {
  readonly process: Deno.ChildProcess;
  readonly #lines: ReadableStreamDefaultReader<string>;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  #buffer = "";

  constructor(script: string, args: string[]) {
    this.process = new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-read", "--allow-write", script, ...args],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#lines = this.process.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    this.#writer = this.process.stdin.getWriter();
  }

  /** The next line the child prints. */
  async line(): Promise<string> {
    while (!this.#buffer.includes("\n")) {
      const { done, value } = await this.#lines.read();
      if (done) throw new Error(`the child exited: ${this.#buffer}`);
      this.#buffer += value;
    }
    const at = this.#buffer.indexOf("\n");
    const line = this.#buffer.slice(0, at);
    this.#buffer = this.#buffer.slice(at + 1);
    return line;
  }

  /** Sends one line to the child's stdin. */
  async send(text = "go"): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(`${text}\n`));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      this.process.kill("SIGKILL");
    } catch { /* already gone */ }
    await this.#writer.close().catch(() => {});
    await this.#lines.cancel().catch(() => {});
    await this.process.status;
  }
}
