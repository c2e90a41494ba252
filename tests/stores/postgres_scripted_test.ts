// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore without a database: its options and arguments, checked
 * eagerly, and its documented numbers and outcomes on a scripted
 * postgres.js.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  postgresMigration,
  type PostgresSql,
  PostgresStore,
} from "../../src/stores/postgres.ts";
import { StoreError } from "../../src/store.ts";
import { ok, opts } from "./_postgres_fixtures.ts";

Deno.test("PostgresStore validates its options and arguments eagerly", async () => {
  const sql = postgres("postgres://postgres@127.0.0.1:1/none", { max: 1 });
  try {
    for (const table of ["", "a.b.c", ".b", "a.", "x\0y", "t".repeat(49)]) {
      assert.throws(() => new PostgresStore({ sql, table }), TypeError, table);
    }
    assert.throws(() => new PostgresStore({ sql, timeoutMs: 0 }), RangeError);
    assert.throws(
      // @ts-expect-error: not a postgres.js instance
      () => new PostgresStore({ sql: {} }),
      TypeError,
    );
    const store = new PostgresStore({ sql, table: "é.t" });
    assert.equal(store.table, '"é"."t"');
    await assert.rejects(() => store.claim("", opts("f")), TypeError);
    await assert.rejects(
      () => store.claim("s", opts("f", { leaseMs: -1 })),
      RangeError,
    );
    await assert.rejects(
      () => store.claim("s", opts("f", { ttlMs: Number.NaN })),
      RangeError,
    );
    await assert.rejects(
      () => store.complete("s", "t", { status: 99, headers: [], body: null }),
      TypeError,
    );
    assert.ok(
      postgresMigration("a.b").includes('CREATE TABLE IF NOT EXISTS "a"."b"'),
    );
  } finally {
    await sql.end();
  }
});

// --- documented numbers and outcomes, on a scripted postgres.js ---------------

/**
 * A postgres.js stand-in: each statement gets `answer(kind, parameters)`,
 * its kind the statement's first word (`WITH` claims and sweeps, `UPDATE`
 * completes and extends, `DELETE` releases); `sent` lists the kinds.
 */
function scripted(
  answer: (kind: string, parameters: unknown[]) => Promise<unknown[]>,
) {
  const sent: string[] = [];
  const sql = {
    unsafe(text: string, parameters: unknown[] = []) {
      const kind = text.startsWith("WITH doomed")
        ? "sweep"
        : text.split(/\s/, 1)[0]!;
      sent.push(kind);
      return Object.assign(answer(kind, parameters), { cancel() {} });
    },
  } as unknown as PostgresSql;
  return { sql, sent };
}

const rows = (list: unknown[], count = list.length) =>
  Promise.resolve(Object.assign(list, { count }));

Deno.test("PostgresStore runs a claim that finds no row 4 times in all, then answers in flight", async () => {
  for (const [empty, state] of [[3, "acquired"], [4, "in_flight"]] as const) {
    let left = empty;
    const { sql, sent } = scripted((_kind, [, , token]) =>
      left-- > 0 ? rows([]) : rows([{ token, takeovers: 0 }])
    );
    const store = new PostgresStore({ sql });
    const claim = await store.claim("s", opts("fp"));
    assert.equal(claim.state, state, `${empty} empty answers`);
    assert.equal(sent.length, Math.min(empty + 1, 4));
    if (claim.state === "in_flight") {
      assert.deepEqual(claim, {
        state: "in_flight",
        fingerprint: null,
        retryAfterMs: 1,
      });
    }
  }
});

Deno.test("PostgresStore runs a claim again when the row it read was free, 4 times in all", async () => {
  let reads = 0;
  const { sql, sent } = scripted(() => (reads++, rows([{ free: true }])));
  const store = new PostgresStore({ sql });
  assert.equal((await store.claim("s", opts("fp"))).state, "in_flight");
  assert.equal(reads, 4);
  assert.deepEqual(sent, ["WITH", "WITH", "WITH", "WITH"]);
});

Deno.test("PostgresStore writes: one row changed is applied, none lost, a failure a StoreError", async () => {
  let answer: () => Promise<unknown[]> = () => rows([], 1);
  const { sql } = scripted(() => answer());
  const store = new PostgresStore({ sql });
  const writes = [
    () => store.complete("s", "t", ok),
    () => store.release("s", "t"),
    () => store.extend("s", "t", 1_000),
  ];
  for (const write of writes) assert.equal(await write(), "applied");
  answer = () => rows([], 0);
  for (const write of writes) assert.equal(await write(), "lost");
  answer = () => Promise.reject(new Error("ECONNRESET"));
  for (const write of writes) {
    const error = await write().then(() => null, (e) => e);
    assert.ok(error instanceof StoreError, String(error));
    assert.match(error.message, /outcome unknown/);
  }
});

Deno.test("PostgresStore.sweep() stops at the first batch that deletes fewer than batchSize (1,000 by default)", async () => {
  const sweep = async (expired: number, batchSize?: number) => {
    let left = expired;
    const batches: unknown[] = [];
    const { sql } = scripted((_kind, [size]) => {
      batches.push(size);
      const count = Math.min(left, size as number);
      left -= count;
      return rows([], count);
    });
    const store = new PostgresStore({ sql });
    const options = batchSize === undefined ? {} : { batchSize };
    return [await store.sweep(options), batches.length, batches[0]];
  };
  assert.deepEqual(await sweep(2, 3), [2, 1, 3]); // n − 1
  assert.deepEqual(await sweep(3, 3), [3, 2, 3]); // n: one more, empty
  assert.deepEqual(await sweep(4, 3), [4, 2, 3]); // n + 1
  assert.deepEqual(await sweep(999), [999, 1, 1_000]);
  assert.deepEqual(await sweep(1_000), [1_000, 2, 1_000]);
});

Deno.test("PostgresStore takes a table name of up to 48 bytes and a schema name of up to 63", () => {
  const { sql } = scripted(() => rows([]));
  const accepts = (table: string) => new PostgresStore({ sql, table }).table;
  const refuses = (table: string) =>
    assert.throws(() => new PostgresStore({ sql, table }), TypeError, table);
  accepts("t".repeat(47));
  accepts("t".repeat(48));
  refuses("t".repeat(49));
  accepts("é".repeat(24)); // bytes, not characters
  refuses("é".repeat(24) + "t");
  accepts(`${"s".repeat(62)}.t`);
  accepts(`${"s".repeat(63)}.t`);
  refuses(`${"s".repeat(64)}.t`);
  refuses(`${"é".repeat(32)}.t`);
});

Deno.test("PostgresStore gives a statement 2,000 ms by default", async () => {
  const timers: number[] = [];
  const real = globalThis.setTimeout;
  globalThis.setTimeout = ((_fn: () => void, ms = 0) => {
    timers.push(ms);
    return { ref() {}, unref() {} };
  }) as unknown as typeof setTimeout;
  try {
    let answer!: () => void;
    const { sql } = scripted((_kind, [, , token]) =>
      new Promise((resolve) => {
        answer = () => resolve(Object.assign([{ token }], { count: 1 }));
      })
    );
    const store = new PostgresStore({ sql });
    const claim = store.claim("s", opts("fp"));
    assert.deepEqual(timers, [2_000]);
    answer();
    assert.equal((await claim).state, "acquired");
  } finally {
    globalThis.setTimeout = real;
  }
});
