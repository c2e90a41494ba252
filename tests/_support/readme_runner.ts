// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The runner behind tests/readme_test.ts: a scratch project that maps the
 * package to this checkout, and one method per kind of block (the kinds are
 * listed in that test's module doc).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import postgres from "postgres";
import { slotOf } from "../../src/fingerprint.ts";
import {
  DATABASE_URL,
  type PrivateRedis,
  REDIS_URL,
  startRedisServer,
} from "./services.ts";
import { freePort } from "./http.ts";
import { MYSQL_URL, mysqlPool } from "./mariadb.ts";
import {
  type Block,
  expandWords,
  matchOutput,
  shellWords,
} from "./markdown.ts";

/** The repository's root. */
export const ROOT: URL = new URL("../../", import.meta.url);
const ROOT_PATH = ROOT.pathname.replace(/\/$/, "");
/** The documents whose blocks run here: the README and the pages it links. */
export const DOCUMENTS: string[] = [
  "README.md",
  ...[...Deno.readDirSync(new URL("docs/", ROOT))]
    .map((entry) => `docs/${entry.name}`)
    // The design's inline commands are its prose, not an operator's steps.
    .filter((path) => path.endsWith(".md") && path !== "docs/architecture.md")
    .sort(),
];
export const CONTRIBUTING: URL = new URL("CONTRIBUTING.md", ROOT);

/**
 * Whether `fragment` occurs in `file`, line by line, indentation aside; its
 * first line may end a line of the file and its last line may begin one.
 *
 * @param file The file's text.
 * @param fragment The block's text.
 * @returns Whether it occurs.
 */
export function containsFragment(file: string, fragment: string): boolean {
  const have = file.split("\n").map((l) => l.trim());
  const want = fragment.trim().split("\n").map((l) => l.trim());
  const last = want.length - 1;
  for (let i = 0; i + want.length <= have.length; i++) {
    let found = true;
    for (let j = 0; j <= last && found; j++) {
      const h = have[i + j]!;
      const w = want[j]!;
      if (last === 0) found = h.includes(w);
      else if (j === 0) found = h.endsWith(w);
      else if (j === last) found = h.startsWith(w);
      else found = h === w;
    }
    if (found) return true;
  }
  return false;
}

/** A command of a shell block, with the `# ` lines that follow it. */
interface Command {
  /** The command line as written. */
  line: string;
  words: string[];
  expected: string[];
}

function commandsOf(block: Block): Command[] {
  const commands: Command[] = [];
  for (const raw of block.text.split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    if (line.startsWith("#")) {
      const last = commands.at(-1);
      if (last === undefined) continue; // a comment before any command
      last.expected.push(line.replace(/^#\s?/, ""));
      continue;
    }
    commands.push({ line, words: shellWords(line), expected: [] });
  }
  return commands;
}

/** The alias README.md defines for the CLI, and the package entry it names. */
const CLI_ALIAS =
  'alias idem="deno run -A --unstable-kv jsr:@idempotent/http/cli"';

/** Splits leading `VAR=value` words off a command. */
function environmentOf(words: string[]): {
  env: Record<string, string>;
  argv: string[];
} {
  const env: Record<string, string> = {};
  let i = 0;
  for (; i < words.length; i++) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(words[i]!);
    if (m === null) break;
    env[m[1]!] = m[2]!;
  }
  // The test's services, wherever the README's defaults point.
  if ("DATABASE_URL" in env) env.DATABASE_URL = DATABASE_URL;
  if ("REDIS_URL" in env) env.REDIS_URL = REDIS_URL;
  if ("MYSQL_URL" in env) env.MYSQL_URL = MYSQL_URL;
  return { env, argv: words.slice(i) };
}

const decoder = new TextDecoder();

/** A server a `serve` block started. */
interface Server {
  block: Block;
  /** The command that started it. */
  command: string;
  port: number;
  child: Deno.ChildProcess;
  output: Promise<Deno.CommandOutput>;
  checked: boolean;
}

/** Runs the README in a scratch project. */
export class Runner {
  scratch = "";
  server: Server | null = null;
  ran = new Set<string>();
  /** Keys sent by the default replay check, for the cleanup. */
  keys: string[] = [];
  /**
   * The variables of `cli` blocks, and whether the alias was defined. Their
   * `$REDIS_URL` is a private server of this test's: the shared one may hold
   * the README's example key under its example prefix, written by anyone.
   */
  vars: Record<string, string> = { REDIS_URL, DATABASE_URL };
  privateRedis: PrivateRedis | null = null;
  alias = false;
  /** The file of the package's `./cli` entry (what `jsr:…/cli` runs). */
  cliEntry = "";

  async setUp(blocks: Block[]): Promise<void> {
    this.scratch = await Deno.makeTempDir({ prefix: "readme_test_" });
    this.privateRedis = await startRedisServer();
    this.vars.REDIS_URL = this.privateRedis.url;
    const config = JSON.parse(
      await Deno.readTextFile(new URL("deno.json", ROOT)),
    ) as {
      name: string;
      exports: Record<string, string>;
      imports: Record<string, string>;
      tasks: Record<string, string>;
    };
    this.cliEntry = config.exports["./cli"] ?? "";
    const imports: Record<string, string> = { ...config.imports };
    // The package's entry points, by the same relative paths: the scratch
    // project links this checkout's sources (below), so that every module
    // has one URL whichever way it is reached.
    for (const [sub, path] of Object.entries(config.exports)) {
      imports[config.name + sub.slice(1)] = path;
    }
    await Deno.writeTextFile(
      `${this.scratch}/deno.json`,
      JSON.stringify({ imports, tasks: config.tasks, lock: false }, null, 2),
    );
    for (const dir of ["mod.ts", "src", "examples", "tests"]) {
      await Deno.symlink(`${ROOT_PATH}/${dir}`, `${this.scratch}/${dir}`);
    }
    const files: string[] = [];
    for (const block of blocks) {
      if (block.marker?.[0] !== "file") continue;
      const name = block.marker[1];
      assert.ok(
        name !== undefined && /^[\w.-]+$/.test(name),
        `${block.file}:${block.line}: 'file' needs a plain file name`,
      );
      await Deno.writeTextFile(`${this.scratch}/${name}`, block.text + "\n");
      files.push(name);
    }
    // The examples that fragments come from are type-checked too: `deno run`
    // does not check, and a fragment must type-check where it lives.
    for (const block of blocks) {
      const file = block.marker?.[0] === "fragment" ? block.marker[1] : null;
      if (file && /\.(ts|tsx)$/.test(file) && !files.includes(file)) {
        files.push(file);
      }
    }
    if (files.length > 0) {
      const check = await this.#deno(["check", ...files], {});
      assert.equal(
        check.code,
        0,
        `deno check of the README's files failed:\n${check.text}`,
      );
    }
  }

  async #deno(
    args: string[],
    env: Record<string, string>,
  ): Promise<{ code: number; text: string; stdout: string }> {
    const output = await new Deno.Command(Deno.execPath(), {
      args,
      cwd: this.scratch,
      env: { NO_COLOR: "1", ...env },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = decoder.decode(output.stdout);
    return {
      code: output.code,
      stdout,
      text: stdout + decoder.decode(output.stderr),
    };
  }

  /** Checks that a `serve`/`exits` command starts with `deno`, and notes its files. */
  #argv(block: Block, words: string[]): {
    env: Record<string, string>;
    args: string[];
  } {
    const { env, argv } = environmentOf(words);
    assert.equal(
      argv[0],
      "deno",
      `${block.file}:${block.line}: a command here must start with 'deno'`,
    );
    for (const word of argv) this.ran.add(word);
    return { env, args: argv.slice(1) };
  }

  async serve(block: Block): Promise<void> {
    const commands = commandsOf(block);
    assert.ok(
      commands.length > 0,
      `${block.file}:${block.line}: a 'serve' block holds at least one command`,
    );
    for (const command of commands) {
      await this.stop();
      await this.#start(block, command.words);
    }
  }

  async #start(block: Block, words: string[]): Promise<void> {
    const { env, args } = this.#argv(block, words);
    const port = freePort();
    const child = new Deno.Command(Deno.execPath(), {
      args,
      cwd: this.scratch,
      env: {
        NO_COLOR: "1",
        DATABASE_URL,
        REDIS_URL,
        MYSQL_URL,
        ...env,
        DENO_SERVE_ADDRESS: `tcp:127.0.0.1:${port}`,
      },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const server: Server = {
      block,
      command: words.join(" "),
      port,
      child,
      output: child.output(),
      checked: false,
    };
    this.server = server;
    let exited = false;
    server.output.finally(() => exited = true);
    // Wait for the port to answer (or the process to die), not for a time.
    for (let attempt = 0;; attempt++) {
      if (exited) {
        const out = await server.output;
        this.server = null;
        throw new Error(
          `${block.file}:${block.line}: '${server.command}' exited (${out.code}) before listening:\n${
            decoder.decode(out.stderr)
          }`,
        );
      }
      try {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port });
        conn.close();
        return;
      } catch {
        if (attempt > 1200) {
          throw new Error(
            `${block.file}:${block.line}: '${server.command}' never listened`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  /** The default check of a server no `client` block talked to. */
  async replayCheck(server: Server): Promise<void> {
    const path = server.block.marker?.[1] ?? "/payments";
    const key = `readme-${crypto.randomUUID()}`;
    this.keys.push(key);
    const send = () =>
      fetch(`http://127.0.0.1:${server.port}${path}`, {
        method: "POST",
        headers: {
          "idempotency-key": key,
          "content-type": "application/json",
        },
        body: '{"amount":1999}',
      });
    const first = await send();
    const firstBody = await first.text();
    assert.ok(
      first.ok,
      `${server.block.file}:${server.block.line}: '${server.command}': POST ${path} answered ${first.status}: ${firstBody}`,
    );
    const retry = await send();
    const where =
      `${server.block.file}:${server.block.line}: '${server.command}'`;
    assert.equal(retry.status, first.status, where);
    assert.equal(await retry.text(), firstBody, where);
    assert.equal(
      retry.headers.get("idempotent-replayed"),
      "true",
      `${where}: the retry was not replayed`,
    );
  }

  async client(block: Block): Promise<void> {
    const server = this.server;
    assert.ok(
      server !== null,
      `${block.file}:${block.line}: a 'client' block needs a 'serve' block before it`,
    );
    server.checked = true;
    for (const { words, expected } of commandsOf(block)) {
      assert.equal(
        words[0],
        "curl",
        `${block.file}:${block.line}: a 'client' block holds curl commands`,
      );
      const args: string[] = words.slice(1).map((w: string) =>
        w.replace(
          /^(https?:\/\/)?(localhost|127\.0\.0\.1):8000/,
          `http://127.0.0.1:${server.port}`,
        )
      );
      const out: Deno.CommandOutput = await new Deno.Command("curl", {
        args: ["--silent", "--show-error", ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stdout = decoder.decode(out.stdout);
      assert.equal(
        out.code,
        0,
        `${block.file}:${block.line}: curl failed: ${
          decoder.decode(out.stderr)
        }`,
      );
      const mismatch = matchOutput(stdout, expected);
      assert.equal(mismatch, null, `${block.file}:${block.line}: ${mismatch}`);
    }
  }

  async exits(block: Block): Promise<void> {
    for (const { words, expected } of commandsOf(block)) {
      const { env, args } = this.#argv(block, words);
      const out = await this.#deno(args, {
        DATABASE_URL,
        REDIS_URL,
        ...env,
      });
      assert.equal(
        out.code,
        0,
        `${block.file}:${block.line}: '${
          words.join(" ")
        }' exited ${out.code}:\n${out.text}`,
      );
      const mismatch = matchOutput(out.stdout, expected);
      assert.equal(mismatch, null, `${block.file}:${block.line}: ${mismatch}`);
    }
  }

  async cli(block: Block): Promise<void> {
    for (const { line, words, expected } of commandsOf(block)) {
      const where = `${block.file}:${block.line}`;
      const set = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(words[0]!);
      if (words[0] === "alias") {
        assert.deepEqual(words, shellWords(CLI_ALIAS), `${where}: the alias`);
        this.alias = true;
      } else if (set !== null && words.length === 1) {
        this.vars[set[1]!] = set[2]!.replace(
          /\$([A-Z_][A-Z0-9_]*)/g,
          (_, name) => this.vars[name] ?? "",
        );
      } else {
        await this.idem(where, line, expected);
      }
    }
  }

  /** Runs one `idem …` command line; it must exit 0 or 1. */
  async idem(where: string, line: string, expected: string[]): Promise<void> {
    assert.ok(this.alias, `${where}: 'idem' before the alias defines it`);
    assert.ok(this.cliEntry !== "", "deno.json exports no ./cli");
    const words = expandWords(line, this.vars);
    assert.equal(
      words[0],
      "idem",
      `${where}: a 'cli' command starts with idem`,
    );
    const out = await this.#deno([
      "run",
      "-A",
      "--unstable-kv",
      new URL(this.cliEntry, ROOT).pathname,
      ...words.slice(1),
    ], {});
    assert.ok(
      out.code === 0 || out.code === 1,
      `${where}: '${line}' exited ${out.code}:\n${out.text}`,
    );
    const mismatch = matchOutput(out.stdout, expected);
    assert.equal(mismatch, null, `${where}: ${mismatch}`);
  }

  async fragment(block: Block): Promise<void> {
    const file = block.marker?.[1];
    assert.ok(
      file !== undefined,
      `${block.file}:${block.line}: 'fragment' needs a file`,
    );
    const text = await Deno.readTextFile(new URL(file, ROOT));
    assert.ok(
      containsFragment(text, block.text),
      `${block.file}:${block.line}: this block does not occur verbatim in ${file}`,
    );
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (server === null) return;
    this.server = null;
    try {
      if (!server.checked) await this.replayCheck(server);
    } finally {
      try {
        server.child.kill("SIGTERM");
      } catch {
        // It exited already.
      }
      await server.output;
    }
  }

  async tearDown(): Promise<void> {
    await this.stop().catch(() => {});
    await this.privateRedis?.stop();
    if (this.scratch !== "") {
      await Deno.remove(this.scratch, { recursive: true });
    }
    if (this.keys.length === 0) return;
    // The examples keep records under their own prefixes and tables: remove
    // what the replay checks wrote (the examples use the global scope).
    const slots = this.keys.map((key) => slotOf("", key));
    const redis = await createClient({ url: REDIS_URL }).connect();
    try {
      const names = slots.flatMap((
        s,
      ) => [`myapp:idem:${s}`, `idempotency:${s}`]);
      await redis.del(names);
    } finally {
      redis.destroy();
    }
    const sql = postgres(DATABASE_URL, { onnotice: () => {}, max: 1 });
    try {
      for (const table of ["app.idempotency_keys", "idempotency_keys"]) {
        const [row] = await sql`SELECT to_regclass(${table}) AS t`;
        if (row?.t === null) continue;
        await sql.unsafe(`DELETE FROM ${table} WHERE slot = ANY($1)`, [
          slots,
        ] as never);
      }
    } finally {
      await sql.end();
    }
    const pool = mysqlPool();
    try {
      const [found] = await pool.query(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'example_idempotency_keys'",
      );
      if ((found as unknown[]).length > 0) {
        await pool.query(
          "DELETE FROM example_idempotency_keys WHERE slot IN (?)",
          [slots],
        );
      }
    } finally {
      await pool.end();
    }
  }
}
