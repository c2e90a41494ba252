// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A command line to look at and repair the records of any store of this
 * package, or of a FailoverStore's two: `inspect` one key, `forget` it, or
 * count records by state with `stats` (docs/architecture.md, Inspect and
 * forget). Exit codes: 0 done, 1 no record, 2 usage error (nothing read or
 * changed), 3 a store unreachable or failed; `--help` says the rest.
 *
 * ```sh
 * deno run -A jsr:@idempotent/http/cli inspect --redis redis://127.0.0.1:6379 --scope alice --key 8e03978e
 * ```
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

import { parseArgs, UsageError } from "./_args.ts";
import { ask, report, ROLES } from "./_report.ts";
import { causes, open, type Opened, where } from "./_stores.ts";
import {
  type EncryptionKeys,
  generateEncryptionKey,
  importEncryptionKeys,
} from "../encryption.ts";
import { KEY_ID } from "../_seal.ts";
import { settle, type Settled } from "../stores/_shared.ts";

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

Usage: deno run -A [--unstable-kv] jsr:@idempotent/http/cli COMMAND STORE [OPTIONS]

Commands:
  inspect  What holds one key: absent, in flight (its lease), completed (status,
           header names, body size) or unreadable (500 until it expires or is
           forgotten). Read only.
  forget   Deletes one key's record, in flight or completed, unfenced: the next
           request with it runs the handler again. Needs --yes.
  stats    Counts records by state (Redis, KV and DynamoDB read at most
           --limit).
  generate-key [--id ID]
           Prints a new key list entry, ID:BASE64 of 32 random bytes (ID:
           today's date), as importEncryptionKeys() reads it.

Store (one, or the two of a FailoverStore, with the app's options):
  --redis URL [--prefix P]     RedisStore (node-redis; default prefix
                               "idempotency:"); a Cluster node is detected
  --redis-cluster URL[,URL...] [--prefix P]   RedisStore on a Redis Cluster
  --postgres URL [--table T]   PostgresStore (T may be schema.table; default
                               "idempotency_keys")
  --mysql URL [--table T]      MysqlStore, MySQL 8 or MariaDB
                               (mysql://USER:PASS@HOST:PORT/DB)
  --kv PATH [--prefix P]       KvStore on a Deno KV file or URL; P a JSON array
                               ('["app","idempotency"]') or one string
  --sqlite PATH [--table T]    SqliteStore on an SQLite file
  --dynamodb TABLE [--endpoint URL] [--region R]
                               DynamoDbStore (AWS credentials and region from
                               the environment unless given)
  --redis … --postgres …       A FailoverStore's two: each record, what a claim
                               finds; forget and stats on both

Record (inspect and forget):
  --scope S --key K   The key K as the client sent it, in scope S (the text
                      your scope function returned).
  --global --key K    K under the scope: "global" option (--scope global is
                      the text "global").
  --secret-env NAME   The app's secret (when it sets \`secret\`), from the
                      environment variable NAME, never the command line; hex:HEX
                      and base64:B64 are bytes, other text is UTF-8.
  --slot SLOT         The slot itself (event.slot).

Sealed records (inspect and stats):
  --encryption-keys-env NAME
                      The app's key list ("k2:BASE64,k1:BASE64") from NAME:
                      inspect opens a sealed record as the app would, stats
                      counts what would not open as unreadable. Without it a
                      sealed record is reported sealed and unverified.

Output:
  --json              One JSON line on stdout (an error too: {"error"}).
  --limit N           stats: records a scan reads at most (default 10000).
  --yes               forget: delete (there is no prompt).
  -h, --help          This text.

Exit codes:
  0  done: inspect found a record, forget deleted one, stats counted
  1  no record: inspect or forget found the key absent (on both stores)
  2  usage error: nothing was read or changed
  3  a store is unreachable or failed (a forget that timed out may have
     deleted); with two stores, after the other's answer

Permissions (instead of -A): --allow-net=HOST:PORT; --allow-env for --postgres
and the variables named; --unstable-kv --allow-read --allow-write for --kv;
--allow-read --allow-write of the file (and -wal, -shm) for --sqlite;
--allow-env --allow-sys --allow-read (of ~/.aws) for --dynamodb.
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
 * const args = ["inspect", "--kv", path, "--global", "--key", "k1", "--json"];
 * assert.equal(await main(args, io), 0);
 * assert.equal(JSON.parse(lines[0]!).status, 201);
 * await Deno.remove(path);
 * ```
 */
export async function main(
  args: string[],
  io: CliIo = DEFAULT_IO,
): Promise<number> {
  if (args[0] === "generate-key" || args[0] === "--generate-key") {
    return generateKey(args.slice(1), io);
  }
  let opened: Settled<Opened>[] = [];
  try {
    const parsed = parseArgs(args, io.env);
    if (parsed === null) {
      for (const line of HELP.trimEnd().split("\n")) io.stdout(line);
      return 0;
    }
    const encryption = await keysOf(parsed.encryptionKeys);
    const { targets } = parsed;
    opened = await Promise.all(targets.map((t) => settle(() => open(t))));
    const usage = opened.find((o) => !o.ok && o.error instanceof UsageError);
    if (usage && !usage.ok) throw usage.error;
    for (const o of opened) if (o.ok && o.value.note) io.stderr(o.value.note);
    const answers = await Promise.all(
      opened.map((o) =>
        o.ok ? settle(() => ask(parsed, o.value, encryption)) : o
      ),
    );
    const names = targets.map((t, i) =>
      targets.length === 1 ? where(t) : `${ROLES[i]}: ${where(t)}`
    );
    const failed = answers.map((a, i) => {
      if (a.ok) return null;
      const how = opened[i]!.ok ? "failed" : "is unreachable";
      const text = `${names[i]} ${how}: ${causes(a.error)}`;
      io.stderr(`error: ${text}`);
      return text;
    });
    if (targets.length === 1 && failed[0]) {
      if (parsed.json) io.stdout(JSON.stringify({ error: failed[0] }));
      return 3;
    }
    const values = answers.map((a) => a.ok ? a.value : null);
    const code = report(parsed, names, values, failed, io);
    return failed.some((f) => f !== null) ? 3 : code;
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr(`error: ${error.message}`);
    io.stderr("Run with --help for usage.");
    return 2;
  } finally {
    for (const o of opened) if (o.ok) await o.value.close().catch(() => {});
  }
}

/** The `--encryption-keys-env` text imported; its errors are usage errors. */
async function keysOf(text?: string): Promise<EncryptionKeys | undefined> {
  if (text === undefined) return undefined;
  try {
    return await importEncryptionKeys(text);
  } catch (error) {
    throw new UsageError(`--encryption-keys-env: ${(error as Error).message}`);
  }
}

/** `generate-key [--id ID]`: one new key list entry on stdout. */
function generateKey(args: string[], io: CliIo): number {
  const [flag, value, ...more] = args;
  if (flag === "--help" || flag === "-h") {
    for (const line of HELP.trimEnd().split("\n")) io.stdout(line);
    return 0;
  }
  const id = flag === "--id"
    ? value
    : flag?.startsWith("--id=")
    ? flag.slice(5)
    : flag === undefined
    ? new Date().toISOString().slice(0, 10)
    : undefined;
  const rest = flag === "--id" ? more : [value, ...more];
  if (
    id === undefined || !KEY_ID.test(id) || /[:,]/.test(id) ||
    rest.some((arg) => arg !== undefined)
  ) {
    io.stderr(
      "error: generate-key takes only --id ID (1 to 32 visible ASCII characters but ';', ':' and ',')",
    );
    io.stderr("Run with --help for usage.");
    return 2;
  }
  io.stdout(generateEncryptionKey(id));
  io.stderr(
    "Put it first in the app's key list (the sealing key), keep the old keys after it until their records expire (ttl).",
  );
  return 0;
}

if (import.meta.main) {
  Deno.exitCode = await main(Deno.args);
}
