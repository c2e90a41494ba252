// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A command line to look at and repair the records of a Redis, PostgreSQL or
 * Deno KV store: `inspect` one key, `forget` it, or count records by state
 * with `stats` (docs/architecture.md, Inspect and forget).
 *
 * ```sh
 * deno run -A jsr:@idempotent/http/cli inspect --redis redis://127.0.0.1:6379 --scope alice --key 8e03978e
 * ```
 *
 * Exit codes: 0 done (found, deleted, counted), 1 no record (`inspect` or
 * `forget` found it absent), 2 usage error (nothing read or changed), 3 the
 * store is unreachable or failed. `--help` says the rest.
 *
 * @example Help, and a usage error
 * ```ts
 * import { main } from "@idempotent/http/cli";
 * import assert from "node:assert/strict";
 *
 * const lines: string[] = [];
 * const io = { stdout: (l: string) => lines.push(l), stderr: (l: string) => lines.push(l), env: () => undefined };
 * assert.equal(await main(["--help"], io), 0);
 * assert.match(lines.join("\n"), /Exit codes/);
 * assert.equal(await main(["inspect", "--key", "k1"], io), 2); // no store named
 * ```
 *
 * @module
 */

import { parseArgs, type Parsed, UsageError } from "./_cli_args.ts";
import { forgetKey, inspectKey, type KeyInspection } from "./inspect.ts";
import { KvStore } from "./stores/kv.ts";
import { PostgresStore } from "./stores/postgres.ts";
import { RedisStore } from "./stores/redis.ts";

/** Where {@linkcode main} writes and what it reads from its environment. */
export interface CliIo {
  /** Writes one line of output (the result). */
  stdout(line: string): void;
  /** Writes one line of diagnostics (warnings, errors). */
  stderr(line: string): void;
  /** Reads an environment variable (for `--secret-env`). */
  env(name: string): string | undefined;
}

/** The text of `--help`. */
const HELP = `Look at and repair the records of @idempotent/http.

Usage:
  deno run -A [--unstable-kv] jsr:@idempotent/http/cli COMMAND STORE [OPTIONS]

Commands:
  inspect  What holds one key: absent, in flight (its lease), completed (its
           status, header names, body size) or unreadable (a value no store
           of ours wrote: 500 until it expires or is forgotten). Read only.
  forget   Deletes one key's record, in flight or completed, unfenced: the next
           request with that key runs the handler again. Needs --yes.
  stats    Counts records by state: PostgreSQL counts them all; Redis (a SCAN)
           and KV (a list) read at most --limit and warn if they stopped there.

Store (exactly one; options as the app gives its store):
  --redis URL [--prefix P]     RedisStore through node-redis (prefix default
                               "idempotency:")
  --postgres URL [--table T]   PostgresStore through postgres.js (T may be
                               schema.table; default "idempotency_keys")
  --kv PATH [--prefix P]       KvStore on a Deno KV file (or URL); P is a JSON
                               array ('["my-app","idempotency"]') or one string
                               (default ["idempotency"]); needs --unstable-kv

Record (inspect and forget):
  --scope S --key K   The Idempotency-Key K (as the client sent it) in scope S
                      (what your scope function returned for the request;
                      global for scope: "global").
  --secret-env NAME   The app's secret, read from the environment variable
                      NAME: needed when the app sets \`secret\`. Never on the
                      command line, where ps, /proc and shell history show it.
  --slot SLOT         The slot itself, as the middleware's events give it
                      (event.slot).

Output:
  --json              One JSON line on stdout, for scripts: inspect, the slot
                      and the record ({"slot", "state", ...}); forget,
                      {"slot", "result"}; stats, the counts and "exact".
  --limit N           stats: records Redis or KV read at most (default 10000).
  --yes               forget: delete (there is no prompt).
  -h, --help          This text.

Exit codes:
  0  done: inspect found a record, forget deleted one, stats counted
  1  no record: inspect or forget found the key absent
  2  usage error: nothing was read or changed
  3  the store is unreachable or failed (a forget that timed out may have
     deleted)

Permissions (instead of -A): --allow-net=HOST:PORT of the server;
--postgres: --allow-env (postgres.js reads the PG* variables); --secret-env
NAME: --allow-env=NAME; --kv PATH: --unstable-kv --allow-read=PATH
--allow-write=PATH.
`;

const DEFAULT_IO: CliIo = {
  // deno-lint-ignore no-console
  stdout: (line) => console.log(line),
  // deno-lint-ignore no-console
  stderr: (line) => console.error(line),
  env: (name) => Deno.env.get(name),
};

/**
 * Runs the command line `args` (as `Deno.args`), writing to `io` (by default
 * the console), and returns the exit code (see the module doc). It opens the
 * store's connection and closes it before it returns.
 *
 * @example Inspect a KV record the middleware wrote (run with --unstable-kv)
 * ```ts
 * import { main } from "@idempotent/http/cli";
 * import { idempotency } from "@idempotent/http";
 * import { KvStore } from "@idempotent/http/kv";
 * import assert from "node:assert/strict";
 *
 * const path = await Deno.makeTempFile({ suffix: ".db" });
 * const kv = await Deno.openKv(path);
 * const handler = idempotency(() => new Response("paid", { status: 201 }), {
 *   scope: "global",
 *   store: new KvStore({ kv }),
 * });
 * const post = new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "k1" } });
 * await (await handler(post)).text();
 * kv.close();
 *
 * const lines: string[] = [];
 * const io = { stdout: (l: string) => lines.push(l), stderr: (l: string) => lines.push(l), env: () => undefined };
 * const args = ["inspect", "--kv", path, "--scope", "global", "--key", "k1", "--json"];
 * assert.equal(await main(args, io), 0);
 * assert.equal(JSON.parse(lines[0]!).status, 201);
 * await Deno.remove(path);
 * ```
 */
export async function main(
  args: string[],
  io: CliIo = DEFAULT_IO,
): Promise<number> {
  let parsed: Parsed | null = null;
  let opened: Opened;
  try {
    parsed = parseArgs(args, io.env);
    if (parsed === null) {
      for (const line of HELP.trimEnd().split("\n")) io.stdout(line);
      return 0;
    }
    opened = await open(parsed.target);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`error: ${error.message}`);
      io.stderr("Run with --help for usage.");
      return 2;
    }
    io.stderr(
      `error: ${where(parsed!.target)} is unreachable: ${causes(error)}`,
    );
    return 3;
  }
  try {
    return await run(parsed, opened.store, io);
  } catch (error) {
    io.stderr(`error: ${where(parsed.target)} failed: ${causes(error)}`);
    return 3;
  } finally {
    await opened.close().catch(() => {});
  }
}

async function run(
  { command, record, label, json, limit }: Parsed,
  store: Opened["store"],
  io: CliIo,
): Promise<number> {
  if (command === "stats") {
    const stats = await store.stats(limit === undefined ? {} : { limit });
    if (!stats.exact) {
      io.stderr(
        "warning: the count stopped at its limit: the counts are a lower bound (raise --limit)",
      );
    }
    const total = stats.inFlight + stats.completed + stats.unreadable;
    const bound = stats.exact ? "" : "at least ";
    io.stdout(
      json
        ? JSON.stringify(stats)
        : `${bound}${total} records: ${stats.inFlight} in flight, ${stats.completed} completed, ${stats.unreadable} unreadable`,
    );
    return 0;
  }
  if (command === "forget") {
    const forgotten = await forgetKey(store, record!);
    io.stdout(
      json
        ? JSON.stringify(forgotten)
        : forgotten.result === "deleted"
        ? `deleted: ${label}; the next request with it runs the handler`
        : `absent: ${label} has no record (nothing deleted)`,
    );
    return forgotten.result === "deleted" ? 0 : 1;
  }
  const found = await inspectKey(store, record!);
  if (json) io.stdout(JSON.stringify(found));
  else for (const line of peekText(label, found)) io.stdout(line);
  return found.state === "absent" ? 1 : 0;
}

const STATES = {
  absent: "absent: no record (never claimed, expired or forgotten)",
  unreadable: "unreadable: answers 500 until it expires or is forgotten",
  "in_flight": "in flight: the handler runs, or ran and its write is due",
  completed: "completed: retries get this answer",
};

function peekText(label: string, peek: KeyInspection): string[] {
  const rows = [["slot", peek.slot], ["state", STATES[peek.state]]];
  if (peek.state === "unreadable") rows.push(["expires", time(peek.expiresAt)]);
  if (peek.state === "in_flight") {
    rows.push(
      ["claimed", time(peek.claimedAt)],
      ["lease ends", time(peek.leaseExpiresAt)],
      ["expires", time(peek.expiresAt)],
      ["fingerprint", peek.fingerprint],
    );
  }
  if (peek.state === "completed") {
    const headers = peek.headerNames.join(", ") || "(none)";
    rows.push(
      ["status", String(peek.status)],
      [
        "headers",
        peek.sealed ? "sealed (the encryption option): names hidden" : headers,
      ],
      [
        "body",
        peek.bodyBytes === null
          ? `not recorded (${peek.omitted ?? "omitted"})`
          : `${peek.bodyBytes} bytes`,
      ],
      ["claimed", time(peek.claimedAt)],
      ["expires", time(peek.expiresAt)],
      ["fingerprint", peek.fingerprint],
    );
  }
  return [
    label,
    ...rows.map(([name, value]) => `  ${name!.padEnd(12)} ${value}`),
  ];
}

function time(ms: number | null): string {
  if (ms === null) return "(not kept by this store)";
  const s = Math.round((ms - Date.now()) / 1000);
  const a = Math.abs(s);
  const span = a < 120
    ? `${a} s`
    : a < 7200
    ? `${Math.round(a / 60)} min`
    : `${Math.round(a / 3600)} h`;
  return `${new Date(ms).toISOString()} (${
    s < 0 ? `${span} ago` : `in ${span}`
  })`;
}

/** The store's place, without credentials. */
function where(target: Parsed["target"]): string {
  if (target.kind === "kv") return `Deno KV at ${target.url}`;
  const name = target.kind === "redis" ? "Redis" : "PostgreSQL";
  const host = URL.parse(target.url)?.host;
  return host ? `${name} at ${host}` : name;
}

/** An error's message and those of its causes that it does not include. */
function causes(error: unknown): string {
  const parts: string[] = [];
  for (let e = error; e !== undefined && parts.length < 4;) {
    const text = e instanceof Error ? e.message || e.name : String(e);
    if (!parts.some((part) => part.includes(text))) parts.push(text);
    e = e instanceof AggregateError && e.errors.length > 0
      ? e.errors[0]
      : e instanceof Error
      ? e.cause
      : undefined;
  }
  const all = parts.join(": ");
  // The store's message says to run store.migrate(); the table may be wrong.
  return /relation .* does not exist/.test(all)
    ? `${all} (is --table the app's?)`
    : all;
}

interface Opened {
  store: RedisStore | PostgresStore | KvStore;
  close(): Promise<unknown>;
}

/** Generous: a stats scan or count may take a while on a large store. */
const TIMEOUT_MS = 30_000;

/** Makes a store; its option errors (TypeError, RangeError) are usage errors. */
function made<S>(make: () => S): S {
  try {
    return make();
  } catch (error) {
    const option = error instanceof TypeError || error instanceof RangeError;
    throw option ? new UsageError(error.message) : error;
  }
}

async function open(target: Parsed["target"]): Promise<Opened> {
  if (target.kind === "redis") {
    const { createClient } = await import("redis");
    const client = createClient({
      url: target.url,
      socket: { connectTimeout: 5000, reconnectStrategy: false },
    });
    client.on("error", () => {}); // each failed command rejects with it
    const options = { client, timeoutMs: TIMEOUT_MS, ...target.options };
    const store = made(() => new RedisStore(options));
    await client.connect();
    return { store, close: () => Promise.resolve(client.destroy()) };
  }
  if (target.kind === "postgres") {
    const { default: postgres } = await import("postgres");
    const sql = postgres(target.url, {
      max: 1,
      connect_timeout: 5,
      onnotice: () => {},
    });
    const close = () => sql.end({ timeout: 1 });
    const options = { sql, timeoutMs: TIMEOUT_MS, ...target.options };
    const store = made(() => new PostgresStore(options)); // connects nothing
    try {
      await sql`SELECT 1`; // unreachable, not failed, when this throws
    } catch (error) {
      await close();
      throw error;
    }
    return { store, close };
  }
  if (!/^[a-z]+:\/\//.test(target.url)) {
    // Opening a missing file would create it.
    await Deno.stat(target.url).catch((cause) => {
      throw new Error("no such file", { cause });
    });
  }
  const kv = await Deno.openKv(target.url);
  const store = new KvStore({ kv, timeoutMs: TIMEOUT_MS, ...target.options });
  return { store, close: () => Promise.resolve(kv.close()) };
}

if (import.meta.main) {
  Deno.exitCode = await main(Deno.args);
}
