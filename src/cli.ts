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

import {
  parseArgs,
  type Parsed,
  type Target,
  UsageError,
} from "./_cli_args.ts";
import {
  forgetKey,
  inspectKey,
  type KeyForgotten,
  type KeyInspection,
} from "./inspect.ts";
import type { IdempotencyStore, StoreStats } from "./store.ts";
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

/** The exit codes of {@linkcode main}, as the help says. */
const EXIT_CODES = Object.freeze({
  /** Done: `inspect` found a record, `forget` deleted one, `stats` counted. */
  ok: 0,
  /** `inspect` or `forget` found no record. */
  absent: 1,
  /** The command line cannot run: nothing was read or changed. */
  usage: 2,
  /** The store is unreachable or failed. */
  store: 3,
});

/** The text of `--help`. */
const HELP = `Look at and repair the records of @idempotent/http.

Usage:
  deno run -A [--unstable-kv] jsr:@idempotent/http/cli COMMAND STORE [OPTIONS]

Commands:
  inspect  What holds one key: absent, in flight (its lease), completed (its
           status, header names, body size) or unreadable (a value no store
           of ours wrote: it answers 409 until it expires). Read only.
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
 * Runs the command line `args` (without the program), writing to `io`, and
 * returns the exit code (see the module doc). It opens the store's
 * connection and closes it before it returns.
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
 *
 * @param args The arguments, as `Deno.args`.
 * @param io Where to write, and the environment; by default the console's.
 * @returns The exit code.
 */
export async function main(
  args: string[],
  io: CliIo = DEFAULT_IO,
): Promise<number> {
  let parsed: Parsed | null;
  try {
    parsed = parseArgs(args, io.env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    return usage(io, error);
  }
  if (parsed === null) {
    for (const line of HELP.trimEnd().split("\n")) io.stdout(line);
    return EXIT_CODES.ok;
  }
  let opened: Opened;
  try {
    opened = await open(parsed.target);
  } catch (error) {
    if (error instanceof UsageError) return usage(io, error);
    io.stderr(
      `error: ${where(parsed.target)} is unreachable: ${causes(error)}`,
    );
    return EXIT_CODES.store;
  }
  try {
    return await run(parsed, opened.store, io);
  } catch (error) {
    io.stderr(`error: ${where(parsed.target)} failed: ${causes(error)}`);
    return EXIT_CODES.store;
  } finally {
    await opened.close().catch(() => {});
  }
}

function usage(io: CliIo, error: UsageError): number {
  io.stderr(`error: ${error.message}`);
  io.stderr("Run with --help for usage.");
  return EXIT_CODES.usage;
}

/** Makes a store, its option errors (TypeError, RangeError) usage errors. */
function made<S>(make: () => S): S {
  try {
    return make();
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) {
      throw new UsageError(error.message);
    }
    throw error;
  }
}

async function run(
  parsed: Parsed,
  store: IdempotencyStore,
  io: CliIo,
): Promise<number> {
  const { command, record, json } = parsed;
  if (command === "stats") {
    if (store.stats === undefined) throw new Error("this store cannot count");
    const limit = parsed.limit;
    const stats = await store.stats(limit === undefined ? {} : { limit });
    if (!stats.exact) {
      io.stderr(
        "warning: the count stopped at its limit: the counts are a lower bound (raise --limit)",
      );
    }
    io.stdout(json ? JSON.stringify(stats) : statsText(stats));
    return EXIT_CODES.ok;
  }
  if (record === null) throw new TypeError("no record named");
  if (command === "forget") {
    const forgotten: KeyForgotten = await forgetKey(store, locationOf(record));
    io.stdout(
      json
        ? JSON.stringify(forgotten)
        : forgotten.result === "deleted"
        ? `deleted: ${parsed.label}; the next request with it runs the handler`
        : `absent: ${parsed.label} has no record (nothing deleted)`,
    );
    return forgotten.result === "deleted" ? EXIT_CODES.ok : EXIT_CODES.absent;
  }
  const found: KeyInspection = await inspectKey(store, locationOf(record));
  if (json) io.stdout(JSON.stringify(found));
  else for (const line of peekText(parsed.label, found)) io.stdout(line);
  return found.state === "absent" ? EXIT_CODES.absent : EXIT_CODES.ok;
}

const locationOf = (record: NonNullable<Parsed["record"]>) =>
  "location" in record ? record.location : { slot: record.slot };

function statsText(stats: StoreStats): string {
  const total = stats.inFlight + stats.completed + stats.unreadable;
  return `${
    stats.exact ? "" : "at least "
  }${total} records: ${stats.inFlight} in flight, ${stats.completed} completed, ${stats.unreadable} unreadable`;
}

function peekText(label: string, peek: KeyInspection): string[] {
  const lines = [`${label}`, `  slot         ${peek.slot}`];
  const row = (name: string, value: string) =>
    lines.push(`  ${name.padEnd(12)} ${value}`);
  switch (peek.state) {
    case "absent":
      row("state", "absent: no record (never claimed, expired or forgotten)");
      break;
    case "unreadable":
      row("state", "unreadable: answers 409 until it expires");
      row("expires", time(peek.expiresAt));
      break;
    case "in_flight":
      row("state", "in flight: the handler runs, or ran and its write is due");
      row("claimed", time(peek.claimedAt));
      row("lease ends", time(peek.leaseExpiresAt));
      row("expires", time(peek.expiresAt));
      row("fingerprint", peek.fingerprint);
      break;
    case "completed":
      row("state", "completed: retries get this answer");
      row("status", String(peek.status));
      row(
        "headers",
        peek.sealed
          ? "sealed (the encryption option): names hidden"
          : peek.headerNames.join(", ") || "(none)",
      );
      row(
        "body",
        peek.bodyBytes === null
          ? `not recorded (${peek.omitted ?? "omitted"})`
          : `${peek.bodyBytes} bytes`,
      );
      row("claimed", time(peek.claimedAt));
      row("expires", time(peek.expiresAt));
      row("fingerprint", peek.fingerprint);
      break;
  }
  return lines;
}

function time(ms: number | null): string {
  if (ms === null) return "(not kept by this store)";
  const s = Math.round((ms - Date.now()) / 1000);
  const span = Math.abs(s) < 120
    ? `${Math.abs(s)} s`
    : Math.abs(s) < 7200
    ? `${Math.round(Math.abs(s) / 60)} min`
    : `${Math.round(Math.abs(s) / 3600)} h`;
  return `${new Date(ms).toISOString()} (${
    s < 0 ? `${span} ago` : `in ${span}`
  })`;
}

/** The store's place, without credentials. */
function where(target: Target): string {
  if (target.kind === "kv") return `Deno KV at ${target.path}`;
  const name = target.kind === "redis" ? "Redis" : "PostgreSQL";
  try {
    return `${name} at ${new URL(target.url).host}`;
  } catch {
    return name;
  }
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
  store: IdempotencyStore;
  close(): Promise<void>;
}

/** Generous: a stats scan or count may take a while on a large store. */
const TIMEOUT_MS = 30_000;

async function open(target: Target): Promise<Opened> {
  if (target.kind === "redis") {
    const { createClient } = await import("redis");
    const client = createClient({
      url: target.url,
      socket: { connectTimeout: 5000, reconnectStrategy: false },
    });
    client.on("error", () => {}); // each failed command rejects with it
    const prefix = target.prefix;
    const store = made(() =>
      new RedisStore({
        client,
        timeoutMs: TIMEOUT_MS,
        ...(prefix === undefined ? {} : { prefix }),
      })
    );
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
    const table = target.table;
    const close = () => sql.end({ timeout: 1 });
    try {
      const store = made(() =>
        new PostgresStore({
          sql,
          timeoutMs: TIMEOUT_MS,
          ...(table === undefined ? {} : { table }),
        })
      );
      await sql`SELECT 1`; // unreachable, not failed, when this throws
      return { store, close };
    } catch (error) {
      await close();
      throw error;
    }
  }
  if (!/^[a-z]+:\/\//.test(target.path)) {
    // Opening a missing file would create it.
    await Deno.stat(target.path).catch((cause) => {
      throw new Error("no such file", { cause });
    });
  }
  const kv = await Deno.openKv(target.path);
  const prefix = target.prefix;
  const close = () => Promise.resolve(kv.close());
  try {
    const store = made(() =>
      new KvStore({
        kv,
        timeoutMs: TIMEOUT_MS,
        ...(prefix === undefined ? {} : { prefix }),
      })
    );
    return { store, close };
  } catch (error) {
    await close();
    throw error;
  }
}

if (import.meta.main) {
  Deno.exitCode = await main(Deno.args);
}
