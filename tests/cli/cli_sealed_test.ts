// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `@idempotent/http/cli` as a subprocess on sealed records under a rotated
 * key list, against the real Redis, PostgreSQL and a Deno KV file (the
 * records of `plantSealed`: a, b, c sealed under k1, d under k2, one in clear,
 * one in flight). `--encryption-keys-env` with keys that lack k1: `inspect`
 * says unreadable naming "k1", `stats` counts what the app would not open as
 * unreadable; without keys, sealed and unverified (`--json`: `"sealed": true,
 * "verified": false`); with the right key, completed and its header names.
 * A malformed or unset variable is a usage error that never prints a key.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import type { IdempotencyStore } from "../../src/store.ts";
import { KvStore } from "../../src/stores/kv.ts";
import { MysqlStore } from "../../src/stores/mysql.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import {
  DATABASE_URL,
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "../_support/services.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import { KEY_LISTS, plantSealed } from "../_support/sealed.ts";
import { MYSQL_IGNORE, MYSQL_URL, mysqlPool } from "../_support/mariadb.ts";
import { dropStore } from "../stores/_mysql_fixtures.ts";

const CLI = new URL("../../src/cli/cli.ts", import.meta.url).pathname;
const decoder = new TextDecoder();
const BAD = `k2:${btoa("x".repeat(31))}`;

/** Runs the CLI in a process of its own, the key lists in its environment. */
async function cli(code: number, ...args: string[]) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", CLI, ...args],
    env: {
      NO_COLOR: "1",
      KEYS_DROPPED: KEY_LISTS.dropped,
      KEYS_ROTATED: KEY_LISTS.rotated,
      KEYS_BAD: BAD,
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const run = {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
  assert.equal(
    run.code,
    code,
    `cli ${args.join(" ")} exited ${run.code}:\n${run.stdout}${run.stderr}`,
  );
  return run;
}

async function exercise(store: IdempotencyStore, args: string[]) {
  await plantSealed(store);
  const a = ["inspect", ...args, "--scope", "acct", "--key", "a"];
  const dropped = ["--encryption-keys-env", "KEYS_DROPPED"];
  const rotated = ["--encryption-keys-env", "KEYS_ROTATED"];

  // Keys that lack k1 (the deploy that dropped it): unreadable, naming k1.
  const gone = await cli(0, ...a, ...dropped);
  assert.match(
    gone.stdout,
    /state +unreadable: the app would not open it \(sealed under key id "k1", not among the keys given\), so it answers 500 until it expires or is forgotten/,
  );
  assert.doesNotMatch(gone.stdout, /retries get this answer/);
  const goneJson = JSON.parse(
    (await cli(0, ...a, ...dropped, "--json")).stdout,
  );
  assert.equal(goneJson.state, "unreadable");
  assert.equal(goneJson.sealed, true);
  assert.equal(goneJson.verified, false);
  assert.equal(goneJson.keyId, "k1");
  assert.match(goneJson.reason, /"k1", not among the keys given/);

  // No keys: sealed and unverified, never a plain "retries get this answer".
  const bare = await cli(0, ...a);
  assert.match(
    bare.stdout,
    /state +completed, sealed and unverified: retries get this answer only if the app holds key id "k1" \(give --encryption-keys-env to check\)/,
  );
  assert.match(
    bare.stdout,
    /headers +sealed \(the encryption option\): names hidden/,
  );
  // The stored size, not the response body's: version 4 holds the headers too.
  assert.match(
    bare.stdout,
    /body +\d+ bytes as stored, sealed\n/,
  );
  const bareJson = JSON.parse((await cli(0, ...a, "--json")).stdout);
  assert.equal(bareJson.state, "completed");
  assert.equal(bareJson.sealed, true);
  assert.equal(bareJson.verified, false);
  assert.equal(bareJson.keyId, "k1");

  // The right key: completed, verified, the names shown.
  const right = await cli(0, ...a, ...rotated);
  assert.match(
    right.stdout,
    /state +completed: retries get this answer \(sealed under key id "k1"; it opens with the keys given\)/,
  );
  assert.match(right.stdout, /headers +content-type, x-order/);
  assert.match(right.stdout, /body +\d+ bytes\n/);
  assert.match(right.stdout, /body +14 bytes/);
  const rightJson = JSON.parse(
    (await cli(0, ...a, ...rotated, "--json")).stdout,
  );
  assert.equal(rightJson.verified, true);
  assert.deepEqual(rightJson.headerNames, ["content-type", "x-order"]);

  // The counts: by state without keys; with k1 dropped, what would not open.
  const plain = JSON.parse((await cli(0, "stats", ...args, "--json")).stdout);
  assert.deepEqual(
    [plain.inFlight, plain.completed, plain.unreadable, plain.sealed],
    [1, 5, 0, { k1: 3, k2: 1 }],
  );
  const stats = await cli(0, "stats", ...args, ...dropped);
  assert.match(
    stats.stdout,
    /^6 records: 1 in flight, 1 completed, 4 unreadable$/m,
  );
  assert.match(
    stats.stderr,
    /warning: 4 completed records would not open with the keys given \(sealed under another key id, or in clear\): counted unreadable/,
  );
  const statsRotated = JSON.parse(
    (await cli(0, "stats", ...args, ...rotated, "--json")).stdout,
  );
  assert.deepEqual(
    [statsRotated.completed, statsRotated.unreadable, statsRotated.unopened],
    [4, 1, 1],
  );

  // forget takes the keys too (it needs none); the record goes.
  await cli(
    0,
    "forget",
    ...args,
    "--scope",
    "acct",
    "--key",
    "a",
    ...dropped,
    "--yes",
  );
  await cli(1, ...a, ...dropped);
}

Deno.test("cli --encryption-keys-env: a malformed or unset variable exits 2 before any connection, never printing a key", async () => {
  const args = [
    "inspect",
    "--kv",
    "/nonexistent.db",
    "--scope",
    "g",
    "--key",
    "k",
  ];
  const bad = await cli(2, ...args, "--encryption-keys-env", "KEYS_BAD");
  assert.match(
    bad.stderr,
    /--encryption-keys-env: The encryption key list's entry 1 \(id "k2"\) decodes to 31 bytes; a key is 32/,
  );
  assert.ok(!bad.stderr.includes(BAD.slice(3)), bad.stderr);
  const unset = await cli(2, ...args, "--encryption-keys-env", "KEYS_NONE");
  assert.match(unset.stderr, /the environment variable KEYS_NONE is not set/);
  const help = await cli(0, "--help");
  assert.match(help.stdout, /--encryption-keys-env NAME/);
  assert.match(help.stdout, /generate-key \[--id ID\]/);
});

integrationTest(
  "cli on sealed RedisStore records under a rotated key list",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("cli-sealed")}:`;
    const client = await createClient({ url: REDIS_URL }).connect();
    try {
      await exercise(new RedisStore({ client, prefix }), [
        "--redis",
        REDIS_URL,
        "--prefix",
        prefix,
      ]);
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
);

integrationTest(
  "cli on sealed PostgresStore records under a rotated key list",
  POSTGRES_IGNORE,
  async () => {
    await using db = await postgresSchema("clisealed");
    const table = `${db.schema}.idempotency_keys`;
    const store = new PostgresStore({ sql: db.sql, table });
    await store.migrate();
    await exercise(store, ["--postgres", DATABASE_URL, "--table", table]);
  },
);

integrationTest(
  "cli on sealed MysqlStore records under a rotated key list",
  MYSQL_IGNORE,
  async () => {
    const pool = mysqlPool();
    const table = uniquePrefix("clisealed");
    try {
      const store = new MysqlStore({ pool, table });
      await store.migrate();
      await exercise(store, ["--mysql", MYSQL_URL, "--table", table]);
    } finally {
      await dropStore(pool, table);
      await pool.end();
    }
  },
);

integrationTest(
  "cli on sealed KvStore records under a rotated key list",
  false,
  async () => {
    const path = await Deno.makeTempFile({ suffix: ".db" });
    const kv = await Deno.openKv(path);
    try {
      await exercise(new KvStore({ kv }), ["--kv", path]);
    } finally {
      kv.close();
      await Deno.remove(path);
    }
  },
);
