// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * SqliteStore on real files: the conformance suite (on a path the store
 * opens, and on an application's DatabaseSync), one statement per
 * operation, concurrent claims and takeovers, and rows no store wrote.
 * Other processes, locks and faults are in `sqlite_faults_test.ts`,
 * transactions in `sqlite_transaction_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { storeConformance } from "../../src/testing/testing.ts";
import { sleep } from "../_support/time.ts";
import {
  ok,
  opts,
  plant,
  sqliteStore,
  tempDatabase,
} from "./_sqlite_fixtures.ts";

// --- the shared suite -------------------------------------------------------

for (const given of ["a path", "an application's DatabaseSync"] as const) {
  let temp: Awaited<ReturnType<typeof tempDatabase>>;
  storeConformance({
    name: `SqliteStore (on ${given})`,
    leaseMs: 300,
    async setup() {
      temp = await tempDatabase();
      const db = new DatabaseSync(temp.path);
      const store = new SqliteStore({
        database: given === "a path" ? temp.path : db,
      });
      await store.migrate();
      return {
        store,
        elapse: sleep,
        poison(slot, kind) {
          plant(db, store.table, slot, kind);
          return Promise.resolve();
        },
        async teardown() {
          store.close();
          db.close();
          await temp[Symbol.asyncDispose]();
        },
      };
    },
  });
}

// --- what reads and what writes ----------------------------------------------

/** The file's `data_version` as another connection sees it: it moves when someone else commits. */
function watcher(path: string): () => number {
  const other = new DatabaseSync(path);
  const statement = other.prepare("PRAGMA data_version");
  return () => Number(statement.get()?.data_version);
}

Deno.test("SqliteStore answers a replay and a conflict without writing; a new key, a completion and a takeover write once each", async () => {
  await using s = await sqliteStore();
  const version = watcher(s.path);
  const writes = async (fn: () => Promise<unknown>) => {
    const before = version();
    await fn();
    return version() - before;
  };
  let token = "";
  assert.equal(
    await writes(async () => {
      const claim = await s.store.claim("k", opts("f"));
      assert.equal(claim.state, "acquired");
      if (claim.state === "acquired") token = claim.token;
    }),
    1,
  );
  assert.equal(
    await writes(async () =>
      assert.equal((await s.store.claim("k", opts("f"))).state, "in_flight")
    ),
    0,
    "a conflict writes nothing",
  );
  assert.equal(
    await writes(async () =>
      assert.equal(await s.store.complete("k", token, ok), "applied")
    ),
    1,
  );
  for (let i = 0; i < 3; i++) {
    assert.equal(
      await writes(async () =>
        assert.equal((await s.store.claim("k", opts("f"))).state, "completed")
      ),
      0,
      "a replay writes nothing",
    );
  }
  await s.store.claim("t", opts("old", { leaseMs: 1 }));
  await sleep(5);
  assert.equal(
    await writes(async () => {
      const taken = await s.store.claim("t", opts("new"));
      assert.equal(taken.state === "acquired" && taken.recovered, true);
    }),
    1,
  );
});

Deno.test("SqliteStore keeps times on the database's clock, in whole milliseconds", async () => {
  await using s = await sqliteStore();
  const before = Date.now();
  await s.store.claim("k", opts("f", { leaseMs: 1500, ttlMs: 4000 }));
  const row = s.db.prepare(
    `SELECT created_at, lease_until, expires_at, typeof(lease_until) AS kind FROM ${s.store.table}`,
  ).get()!;
  assert.equal(row.kind, "integer");
  const created = row.created_at as number;
  assert.ok(created >= before - 50 && created <= Date.now() + 50);
  assert.equal(row.lease_until, created + 1500);
  assert.equal(row.expires_at, created + 4000);
});

// --- rows no SqliteStore wrote --------------------------------------------------

Deno.test("SqliteStore reads rows it did not write (text times, bytes for a state, no deadline, bad headers, no status) as in flight, unreadable in peek and stats, never taken over", async () => {
  await using s = await sqliteStore();
  const kinds = [
    "text_times",
    "blob_state",
    "no_deadline",
    "bad_headers",
    "null_status",
  ] as const;
  for (const kind of kinds) plant(s.db, s.store.table, kind, kind);
  for (const kind of kinds) {
    const claim = await s.store.claim(kind, opts("f", { leaseMs: 1 }));
    assert.equal(claim.state, "in_flight", kind);
    if (claim.state === "in_flight") assert.equal(claim.fingerprint, null);
    assert.equal((await s.store.peek(kind)).state, "unreadable", kind);
  }
  // stats() judges the columns, not the headers' JSON (as PostgreSQL's).
  assert.deepEqual(await s.store.stats(), {
    inFlight: 0,
    completed: 1,
    unreadable: kinds.length - 1,
    exact: true,
    sealed: {},
  });
  await sleep(5);
  for (const kind of kinds) {
    assert.equal((await s.store.claim(kind, opts("f"))).state, "in_flight");
    assert.equal(await s.store.forget(kind), "deleted");
    assert.equal((await s.store.claim(kind, opts("f"))).state, "acquired");
  }
});

// --- migrate, options ---------------------------------------------------------

Deno.test("SqliteStore.migrate() puts the file in WAL mode, gives a connection without one a busy_timeout, keeps one it has, and runs twice", async () => {
  await using temp = await tempDatabase();
  const db = new DatabaseSync(temp.path);
  const store = new SqliteStore({ database: db, busyTimeoutMs: 777 });
  await store.migrate();
  await store.migrate();
  assert.equal(db.prepare("PRAGMA journal_mode").get()?.journal_mode, "wal");
  assert.equal(db.prepare("PRAGMA busy_timeout").get()?.timeout, 777);
  const own = new DatabaseSync(temp.path, { timeout: 50 });
  await new SqliteStore({ database: own }).migrate();
  assert.equal(own.prepare("PRAGMA busy_timeout").get()?.timeout, 50);
  const opened = new SqliteStore({ database: temp.path, busyTimeoutMs: 3 });
  await opened.migrate();
  assert.equal((await opened.claim("k", opts("f"))).state, "acquired");
  opened.close();
  own.close();
  db.close();
});

Deno.test("SqliteStore refuses an in-memory database, a missing table (naming migrate), and bad options, each with a clear answer", async () => {
  const memory = new DatabaseSync(":memory:");
  await assert.rejects(
    new SqliteStore({ database: memory }).migrate(),
    /needs a database file in WAL mode: journal_mode is "memory"/,
  );
  memory.close();
  for (const database of [":memory:", "", 42, null, {}]) {
    assert.throws(
      // deno-lint-ignore no-explicit-any
      () => new SqliteStore({ database: database as any }),
      /'database' must be a node:sqlite DatabaseSync or the path of a file/,
    );
  }
  await using temp = await tempDatabase();
  const unmigrated = new SqliteStore({ database: temp.path });
  await assert.rejects(
    unmigrated.claim("k", opts("f")),
    /SQLite claim failed: no such table: idempotency_keys: run `store.migrate\(\)`/,
  );
  unmigrated.close();
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => new SqliteStore({ database: temp.path, tabel: "x" } as any),
    /SqliteStore has no option 'tabel': did you mean 'table'\?/,
  );
  for (const table of ["", "a\0b", "x".repeat(49), 7]) {
    assert.throws(
      // deno-lint-ignore no-explicit-any
      () => new SqliteStore({ database: temp.path, table: table as any }),
      /'table' must be a non-empty string of at most 48 characters/,
    );
  }
  assert.throws(
    () => new SqliteStore({ database: temp.path, busyTimeoutMs: -1 }),
    RangeError,
  );
  assert.throws(
    () => new SqliteStore({ database: temp.path, timeoutMs: 0 }),
    RangeError,
  );
});

Deno.test('SqliteStore quotes its table as written: "odd ""name"" here" works', async () => {
  await using s = await sqliteStore({ table: 'odd "name" here' });
  assert.equal(s.store.table, '"odd ""name"" here"');
  assert.equal((await s.store.claim("k", opts("f"))).state, "acquired");
});

// --- sweep ---------------------------------------------------------------------

Deno.test("SqliteStore.sweep() deletes exactly the expired rows, batch by batch (n-1, n, n+1 rows of a batch)", async () => {
  await using s = await sqliteStore();
  for (const expired of [2, 3, 4]) {
    s.db.exec(`DELETE FROM ${s.store.table}`);
    for (let i = 0; i < expired; i++) {
      await s.store.claim(`old-${i}`, opts("f", { ttlMs: 1, leaseMs: 1 }));
    }
    await s.store.claim("live", opts("f"));
    await sleep(5);
    assert.equal(await s.store.sweep({ batchSize: 3 }), expired);
    const left = s.db.prepare(`SELECT slot FROM ${s.store.table}`).all();
    assert.deepEqual(left.map((r) => r.slot), ["live"]);
  }
  assert.equal(await s.store.sweep(), 0);
  for (const batchSize of [0, 1.5, -1]) {
    await assert.rejects(s.store.sweep({ batchSize }), RangeError);
  }
});
