// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One `timeoutMs` rule for every store (`timeoutOption()` in
 * src/stores/_store_call.ts): a positive integer of milliseconds, or
 * `Infinity` for no deadline. Pinned at 0/1/2, at the non-integers and the
 * non-numbers, on RedisStore, PostgresStore and KvStore alike; `Infinity`
 * then serves a claim on each real service.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { type RedisCommander, RedisStore } from "../../src/stores/redis.ts";
import { KvStore } from "../../src/stores/kv.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { type MysqlPool, MysqlStore } from "../../src/stores/mysql.ts";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { DatabaseSync } from "node:sqlite";
import { redisTest } from "../_support/redis.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
} from "../_support/services.ts";

const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };

/** Each store made with `timeoutMs`, on a service it never calls here. */
async function eachStore(
  check: (name: string, make: () => unknown) => void,
  timeoutMs: unknown,
): Promise<void> {
  const client: RedisCommander = { sendCommand: () => Promise.resolve(null) };
  const sql = postgres("postgres://postgres@127.0.0.1:1/none", { max: 1 });
  const kv = await Deno.openKv(":memory:");
  const database = new DatabaseSync(":memory:");
  const never = () => Promise.reject(new Error("not called"));
  const pool = { execute: never, getConnection: never } as unknown as MysqlPool;
  try {
    const t = timeoutMs as number;
    check("RedisStore", () => new RedisStore({ client, timeoutMs: t }));
    check("PostgresStore", () => new PostgresStore({ sql, timeoutMs: t }));
    check("KvStore", () => new KvStore({ kv, timeoutMs: t }));
    check("MysqlStore", () => new MysqlStore({ pool, timeoutMs: t }));
    check("SqliteStore", () => new SqliteStore({ database, timeoutMs: t }));
  } finally {
    kv.close();
    database.close();
    await sql.end();
  }
}

Deno.test("every store takes timeoutMs 1, 2 and Infinity, and leaving it out", async () => {
  for (const timeoutMs of [1, 2, 2000, Infinity, undefined]) {
    await eachStore((name, make) => {
      assert.ok(make(), `${name} with ${timeoutMs}`);
    }, timeoutMs);
  }
});

Deno.test("every store refuses a timeoutMs of 0, a fraction, a negative, NaN or a string, in one wording", async () => {
  const cases: [unknown, string][] = [
    [0, "0"],
    [0.5, "0.5"],
    [1.5, "1.5"],
    [-1, "-1"],
    [-Infinity, "-Infinity"],
    [NaN, "NaN"],
    ["2000", '"2000"'],
  ];
  for (const [timeoutMs, shown] of cases) {
    await eachStore((name, make) => {
      assert.throws(make, (error: unknown) => {
        assert.ok(error instanceof RangeError, `${name} with ${shown}`);
        assert.equal(
          error.message,
          `'timeoutMs' must be a positive integer of milliseconds, or Infinity: current value is ${shown}`,
        );
        return true;
      });
    }, timeoutMs);
  }
});

redisTest(
  "RedisStore with timeoutMs Infinity claims on Redis, with no deadline",
  "timeout-infinity",
  async (client, prefix) => {
    const store = new RedisStore({ client, prefix, timeoutMs: Infinity });
    assert.equal((await store.claim("s", opts)).state, "acquired");
    assert.equal((await store.claim("s", opts)).state, "in_flight");
  },
);

integrationTest(
  "PostgresStore with timeoutMs Infinity claims on PostgreSQL, with no deadline",
  POSTGRES_IGNORE,
  async () => {
    const pg = await postgresSchema("timeout-infinity");
    try {
      const table = `${pg.schema}.keys`;
      const store = new PostgresStore({
        sql: pg.sql,
        table,
        timeoutMs: Infinity,
      });
      await store.migrate();
      assert.equal((await store.claim("s", opts)).state, "acquired");
      assert.equal((await store.claim("s", opts)).state, "in_flight");
    } finally {
      await pg.drop();
    }
  },
);

Deno.test("KvStore with timeoutMs Infinity claims on Deno KV, with no deadline", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore({ kv, timeoutMs: Infinity });
    assert.equal((await store.claim("s", opts)).state, "acquired");
    assert.equal((await store.claim("s", opts)).state, "in_flight");
  } finally {
    kv.close();
  }
});
