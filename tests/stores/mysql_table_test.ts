// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MysqlStore's table: migrations, names, sweeps, strict mode whatever the
 * session's, rows no MysqlStore wrote, one statement per operation (counted
 * by the server), and replays that take no row lock.
 *
 * @module
 */

import assert from "node:assert/strict";
import { mysqlMigration, MysqlStore } from "../../src/stores/mysql.ts";
import { StoreError } from "../../src/store.ts";
import { idempotency } from "../../src/idempotency.ts";
import { idempotencyTelemetry } from "../../src/otel.ts";
import { matches, sdkMetrics } from "../otel/_metrics.ts";
import { post } from "../_support/http.ts";
import { uniquePrefix } from "../_support/services.ts";
import { mysqlPool } from "../_support/mariadb.ts";
import {
  dropStore,
  myTest,
  ok,
  opts,
  type Plant,
  plant,
  untilPast,
  withStore,
} from "./_mysql_fixtures.ts";

Deno.test("MysqlStore checks its options and its table's name", () => {
  const pool = { execute() {}, query() {}, getConnection() {} } as never;
  assert.throws(() => new MysqlStore({} as never), /'pool' must be a mysql2/);
  assert.throws(
    () => new MysqlStore({ pool, tabel: "x" } as never),
    /tabel/,
  );
  assert.throws(() => new MysqlStore({ pool, timeoutMs: 0 }), RangeError);
  assert.throws(
    () => new MysqlStore({ pool, isolation: "serializable" } as never),
    /isolation/,
  );
  for (const bad of ["", "a.b.c", ".t", "t.", "a`b", "a\0b", "x".repeat(56)]) {
    assert.throws(() => new MysqlStore({ pool, table: bad }), TypeError, bad);
  }
  for (const good of ["x".repeat(54), "x".repeat(55), "db.t", "ключи"]) {
    assert.equal(typeof new MysqlStore({ pool, table: good }).table, "string");
  }
  assert.equal(new MysqlStore({ pool, table: "db.t" }).table, "`db`.`t`");
  const [table, procedure] = mysqlMigration("db.keys");
  assert.match(table!, /CREATE TABLE IF NOT EXISTS `db`.`keys`/);
  assert.match(procedure!, /CREATE PROCEDURE `db`.`keys_claim_v1`/);
});

myTest(
  "MysqlStore.migrate() is idempotent and safe to run concurrently; a store never migrated says how to fix it",
  async () => {
    const pool = mysqlPool({ connectionLimit: 6 });
    const table = uniquePrefix("mymig");
    const mode = async () => {
      const [rows] = await pool.query("SELECT @@SESSION.sql_mode AS mode");
      return (rows as { mode: string }[])[0]!.mode;
    };
    try {
      const before = await mode();
      const store = new MysqlStore({ pool, table });
      await assert.rejects(
        () => store.claim("s", opts("f")),
        (error: unknown) =>
          error instanceof StoreError &&
          /run `await store.migrate\(\)`/.test(error.message),
      );
      await Promise.all(Array.from({ length: 5 }, () => store.migrate()));
      await store.migrate();
      assert.equal((await store.claim("s", opts("f"))).state, "acquired");
      // migrate() leaves no pooled connection in its strict sql_mode.
      const modes = await Promise.all(Array.from({ length: 6 }, mode));
      assert.deepEqual([...new Set(modes)], [before]);
    } finally {
      await dropStore(pool, table);
      await pool.end();
    }
  },
);

myTest(
  "MysqlStore.sweep() deletes expired rows in batches of batchSize (n-1, n, n+1) and nothing live",
  () =>
    withStore({}, async (store, pool, table) => {
      for (const batchSize of [4, 5, 6]) {
        for (let i = 0; i < 5; i++) {
          await store.claim(`old-${batchSize}-${i}`, opts("o", { ttlMs: 1 }));
        }
        await store.claim(`live-${batchSize}`, opts("l"));
        await untilPast(pool, table, `old-${batchSize}-4`, "expires_at");
        assert.equal(await store.sweep({ batchSize }), 5, `batch ${batchSize}`);
        assert.equal(await store.sweep({ batchSize }), 0);
      }
      const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM \`${table}\``);
      assert.equal(Number((rows as { n: number }[])[0]!.n), 3);
      for (const bad of [0, -1, 1.5, NaN]) {
        await assert.rejects(() => store.sweep({ batchSize: bad }), RangeError);
      }
    }),
);

myTest(
  "MysqlStore's claim runs strict under a session with sql_mode '' (where a plain INSERT truncates), and keeps a long fingerprint whole",
  () =>
    withStore({ connectionLimit: 1 }, async (store, pool, table) => {
      await pool.query("SET SESSION sql_mode = ''");
      const slot = "s".repeat(257); // the column holds 256 bytes
      // The session truncates: a plain INSERT keeps 256 bytes, with a warning.
      await pool.query(
        `INSERT INTO \`${table}\` (slot, version, state, created_at)
         VALUES (?, 1, 'x', UTC_TIMESTAMP(6))`,
        [slot],
      );
      const [rows] = await pool.query(
        `SELECT LENGTH(slot) AS n FROM \`${table}\``,
      );
      assert.deepEqual((rows as { n: number }[]).map((r) => r.n), [256]);
      // The claim's procedure runs strict whatever the session: an error.
      // (The store itself never sends such a slot: assertSlot refuses it.)
      await assert.rejects(
        () =>
          pool.execute(
            `CALL \`${table}_claim_v1\`(?, 'f', 't', 1000, 1000)`,
            [slot],
          ),
        /Data too long for column 'slot'/,
      );
      await assert.rejects(() => store.claim(slot, opts("f")), TypeError);
      const long = "f".repeat(70_000); // past TEXT's 65,535 bytes
      assert.equal((await store.claim("long", opts(long))).state, "acquired");
      const seen = await store.claim("long", opts("other"));
      assert.equal(seen.state === "in_flight" && seen.fingerprint, long);
    }),
);

myTest(
  "MysqlStore reads rows it did not write as in flight (never taken over), peek() says unreadable, stats() counts them",
  () =>
    withStore({}, async (store, pool, table) => {
      const kinds: Plant[] = [
        "garbage",
        "truncated",
        "future_version",
        "no_deadline",
        "bad_headers",
        "null_status",
      ];
      for (const kind of kinds) await plant(pool, table, kind, kind);
      for (const kind of kinds) {
        const claim = await store.claim(kind, opts("f", { leaseMs: 1 }));
        assert.equal(claim.state, "in_flight", kind);
        if (claim.state === "in_flight") {
          assert.equal(claim.fingerprint, null, kind);
          assert.ok(claim.retryAfterMs >= 1, kind);
        }
        assert.equal((await store.peek(kind)).state, "unreadable", kind);
      }
      // stats() counts by state and status, as PostgresStore's does: the
      // completed rows with a status but a bad body or headers count as
      // completed, whatever a claim makes of them.
      assert.deepEqual(await store.stats(), {
        inFlight: 0,
        completed: 2,
        unreadable: kinds.length - 2,
        exact: true,
        sealed: {},
      });
      assert.equal(await store.forget("no_deadline"), "deleted");
      assert.equal(await store.forget("no_deadline"), "absent");
    }),
);

myTest(
  "MysqlStore sends one statement per operation (a fresh claim two: the read, then the INSERT), counted by the server (Questions)",
  () =>
    withStore({ connectionLimit: 1 }, async (store, pool) => {
      const questions = async () => {
        const [rows] = await pool.query("SHOW SESSION STATUS LIKE 'Questions'");
        return Number((rows as { Value: string }[])[0]!.Value);
      };
      const measure = async (
        name: string,
        op: () => Promise<unknown>,
        statements = 1,
      ) => {
        const before = await questions();
        await op();
        // The operation's, and one for the SHOW that reads the count.
        assert.equal(await questions() - before, statements + 1, name);
      };
      // Warm up: each statement's first run also prepares it.
      const warm = await store.claim("warm", opts("w"));
      if (warm.state !== "acquired") throw new Error("not acquired");
      await store.extend("warm", warm.token, 30_000);
      await store.complete("warm", warm.token, ok);
      await store.release("warm", warm.token);
      await store.peek("warm");
      let token = "";
      await measure("claim (fresh)", async () => {
        const claim = await store.claim("s", opts("f"));
        assert.equal(claim.state, "acquired");
        if (claim.state === "acquired") token = claim.token;
      }, 2);
      await measure("claim (in flight)", async () => {
        assert.equal((await store.claim("s", opts("f"))).state, "in_flight");
      });
      await measure("extend", async () => {
        assert.equal(await store.extend("s", token, 30_000), "applied");
      });
      await measure("complete", async () => {
        assert.equal(await store.complete("s", token, ok), "applied");
      });
      await measure("claim (replay)", async () => {
        assert.equal((await store.claim("s", opts("f"))).state, "completed");
      });
      await measure("release (lost)", async () => {
        assert.equal(await store.release("s", token), "lost");
      });
      await measure("peek", async () => {
        assert.equal((await store.peek("s")).state, "completed");
      });
    }),
);

myTest(
  "MysqlStore answers a replay and a conflict while another session holds the row's lock: they take no lock",
  () =>
    withStore({ connectionLimit: 3 }, async (store, pool, table) => {
      const timed = new MysqlStore({ pool, table, timeoutMs: 1000 });
      const live = await store.claim("busy", opts("b"));
      const done = await store.claim("done", opts("d"));
      if (done.state !== "acquired") throw new Error("not acquired");
      assert.equal(await store.complete("done", done.token, ok), "applied");
      assert.equal(live.state, "acquired");
      const admin = await pool.getConnection();
      try {
        await admin.query("START TRANSACTION");
        await admin.query(`SELECT slot FROM \`${table}\` FOR UPDATE`);
        // innodb_lock_wait_timeout is 50 s: a locking claim would time out.
        for (let i = 0; i < 3; i++) {
          assert.equal(
            (await timed.claim("done", opts("d"))).state,
            "completed",
          );
          assert.equal(
            (await timed.claim("busy", opts("b"))).state,
            "in_flight",
          );
        }
      } finally {
        await admin.query("ROLLBACK");
        admin.release();
      }
    }),
);

myTest(
  "MysqlStore fences by the token byte for byte: with a trailing space or in upper case it is another token",
  () =>
    withStore({}, async (store) => {
      const claim = await store.claim("fenced", opts("f"));
      if (claim.state !== "acquired") throw new Error("not acquired");
      for (const other of [`${claim.token} `, claim.token.toUpperCase()]) {
        assert.equal(await store.extend("fenced", other, 30_000), "lost");
        assert.equal(await store.complete("fenced", other, ok), "lost");
        assert.equal(await store.release("fenced", other), "lost");
      }
      assert.equal(await store.complete("fenced", claim.token, ok), "applied");
    }),
);

myTest(
  'MysqlStore under /otel: its operations are timed as idempotency.store "mysql"',
  () =>
    withStore({}, async (inner) => {
      await using metrics = sdkMetrics();
      const telemetry = idempotencyTelemetry({
        meterProvider: metrics.meterProvider,
      });
      const store = telemetry.store(inner);
      const guarded = idempotency(() => new Response("ok", { status: 201 }), {
        scope: "global",
        store,
      });
      await (await guarded(post("k"))).text();
      await (await guarded(post("k"))).text();
      const duration = (await metrics.collect()).get(
        "idempotency.store.duration",
      )!;
      const count = (operation: string) =>
        duration.points
          .filter((p) =>
            matches(p.attributes, {
              "idempotency.store": "mysql",
              "idempotency.store.operation": operation,
            })
          )
          .reduce((n, p) => n + (p.value as { count: number }).count, 0);
      assert.equal(count("claim"), 2);
      assert.equal(count("complete"), 1);
    }),
);
