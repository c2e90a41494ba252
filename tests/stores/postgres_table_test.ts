// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's table on the PostgreSQL of this machine: migrate() from
 * several instances at once and without the right to create schemas, odd
 * names, sweep(), unreadable rows, and the bodies it hands out.
 *
 * Every test works in a schema of its own, dropped afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { DATABASE_URL, uniquePrefix } from "../_support/services.ts";
import { sleep } from "../_support/time.ts";
import {
  connect,
  ok,
  opts,
  pgTest,
  plant,
  quiet,
  quote,
  withSchema,
  withStore,
} from "./_postgres_fixtures.ts";

pgTest(
  "PostgresStore.migrate() run by five instances at once creates the table once",
  () =>
    withSchema(async (schema, admin) => {
      const table = `${schema}.keys`;
      const sqls = Array.from({ length: 5 }, () => connect({ max: 1 }));
      try {
        await Promise.all(
          sqls.map((sql) => new PostgresStore({ sql, table }).migrate()),
        );
        await Promise.all(
          sqls.map((sql) => new PostgresStore({ sql, table }).migrate()),
        );
        const [row] = await admin.unsafe(
          `SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = $1`,
          [schema],
        );
        assert.equal(row?.n, 2, "the primary key and the expires_at index");
        const store = new PostgresStore({ sql: sqls[0]!, table });
        assert.equal((await store.claim("m", opts("m"))).state, "acquired");
      } finally {
        await Promise.all(sqls.map((sql) => sql.end()));
      }
    }),
);

pgTest(
  "PostgresStore.migrate() creates a missing schema, from five instances at once",
  async () => {
    // A fresh schema no one created, with a quote in its name.
    const schema = `${uniquePrefix("pgschema")}'"x`;
    const table = `${schema}.idempotency_keys`;
    const admin = connect({ max: 1 });
    const sqls = Array.from({ length: 5 }, () => connect({ max: 1 }));
    try {
      await Promise.all(
        sqls.map((sql) => new PostgresStore({ sql, table }).migrate()),
      );
      const [row] = await admin.unsafe(
        `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1`,
        [schema],
      );
      assert.equal(row?.n, 1);
      const store = new PostgresStore({ sql: sqls[0]!, table });
      const claim = await store.claim("s", opts("s"));
      assert.equal(claim.state, "acquired");
      if (claim.state === "acquired") {
        assert.equal(await store.complete("s", claim.token, ok), "applied");
      }
      assert.equal((await store.claim("s", opts("s"))).state, "completed");
    } finally {
      await Promise.all(sqls.map((sql) => sql.end()));
      await admin.unsafe(`DROP SCHEMA IF EXISTS ${quote(schema)} CASCADE`);
      await admin.end();
    }
  },
);

pgTest(
  "PostgresStore.migrate() into an existing schema needs no right to create schemas",
  () =>
    withSchema(async (schema, admin) => {
      const role = uniquePrefix("pgrole");
      await admin.unsafe(`CREATE ROLE ${quote(role)} LOGIN`);
      try {
        await admin.unsafe(
          `GRANT USAGE, CREATE ON SCHEMA ${quote(schema)} TO ${quote(role)}`,
        );
        const url = new URL(DATABASE_URL);
        url.username = role;
        url.password = "";
        const sql = postgres(url.href, { ...quiet, max: 1 });
        try {
          const store = new PostgresStore({ sql, table: `${schema}.keys` });
          await store.migrate();
          assert.equal((await store.claim("r", opts("r"))).state, "acquired");
        } finally {
          await sql.end();
        }
      } finally {
        await admin.unsafe(`DROP SCHEMA ${quote(schema)} CASCADE`);
        await admin.unsafe(`CREATE SCHEMA ${quote(schema)}`);
        await admin.unsafe(`DROP ROLE ${quote(role)}`);
      }
    }),
);

// --- sweep, names, poisoned rows --------------------------------------------

pgTest(
  "PostgresStore.sweep() deletes only expired rows, in bounded batches",
  () =>
    withSchema(async (schema, admin) => {
      const seen: string[] = [];
      const sql = connect({
        max: 1,
        debug: (_c: number, query: string) => seen.push(query),
      });
      try {
        const store = new PostgresStore({ sql, table: `${schema}.keys` });
        await store.migrate();
        for (let i = 0; i < 7; i++) {
          const c = await store.claim(`short-${i}`, opts("s", { ttlMs: 50 }));
          if (c.state === "acquired" && i % 2 === 0) {
            await store.complete(`short-${i}`, c.token, ok);
          }
        }
        for (let i = 0; i < 3; i++) {
          await store.claim(`long-${i}`, opts("l", { ttlMs: 60_000 }));
        }
        await plant(admin, store.table, "poison-undated", "no_deadline");
        await sleep(150);
        const before = seen.length;
        assert.equal(await store.sweep({ batchSize: 3 }), 7);
        assert.equal(seen.length - before, 3, "batches of 3, 3 and 1");
        assert.equal(await store.sweep(), 0);
        const rows = await admin.unsafe(
          `SELECT slot FROM ${store.table} ORDER BY slot`,
        );
        assert.deepEqual(rows.map((r) => r.slot), [
          "long-0",
          "long-1",
          "long-2",
          "poison-undated",
        ]);
        await assert.rejects(() => store.sweep({ batchSize: 0 }), RangeError);
      } finally {
        await sql.end();
      }
    }),
);

pgTest(
  "PostgresStore quotes a schema-qualified table name with odd characters",
  async () => {
    const schema = `${uniquePrefix("odd")} "odd"; schema-é`;
    await withSchema(async () => {
      const sql = connect({ max: 1 });
      try {
        const table = `${schema}.Keys "quoted"; DROP TABLE x; --é`;
        const store = new PostgresStore({ sql, table });
        await store.migrate();
        await store.migrate();
        const claim = await store.claim("odd", opts("o", { ttlMs: 50 }));
        assert.equal(claim.state, "acquired");
        if (claim.state !== "acquired") return;
        assert.equal(await store.complete("odd", claim.token, ok), "applied");
        const replay = await store.claim("odd", opts("o"));
        assert.equal(replay.state, "completed");
        await sleep(100);
        assert.equal(await store.sweep(), 1);
        const [found] = await sql.unsafe(
          `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1 AND tablename = $2`,
          [schema, `Keys "quoted"; DROP TABLE x; --é`],
        );
        assert.equal(found?.n, 1);
      } finally {
        await sql.end();
      }
    }, schema);
  },
);

pgTest(
  "PostgresStore reads unreadable rows as in flight and never takes them over before their own expiry",
  () =>
    withSchema(async (schema, admin) => {
      await withStore(schema, { max: 2 }, async (store) => {
        const kinds = [
          "garbage",
          "truncated",
          "future_version",
          "no_deadline",
          "bad_headers",
          "null_status",
        ] as const;
        for (const kind of kinds) {
          await plant(admin, store.table, kind, kind);
          for (let i = 0; i < 2; i++) {
            const seen = await store.claim(kind, opts("p"));
            assert.deepEqual(
              seen.state === "in_flight" ? seen.fingerprint : seen,
              null,
              kind,
            );
            if (seen.state === "in_flight") assert.ok(seen.retryAfterMs >= 1);
          }
          for (const token of ["t", "x"]) {
            assert.equal(await store.extend(kind, token, 1000), "lost", kind);
            assert.equal(await store.complete(kind, token, ok), "lost", kind);
            assert.equal(await store.release(kind, token), "lost", kind);
          }
        }
        // The rows are as planted: nothing was taken over or rewritten.
        const rows = await admin.unsafe(
          `SELECT slot, version, state, fingerprint, token FROM ${store.table} ORDER BY slot`,
        );
        assert.equal(rows.length, kinds.length);
        for (const row of rows) assert.notEqual(row.fingerprint, "p");

        // Past its own expires_at, a poisoned row is absent like any other.
        await admin.unsafe(
          `UPDATE ${store.table} SET expires_at = statement_timestamp() - interval '1 second'
           WHERE slot = 'future_version'`,
        );
        const after = await store.claim("future_version", opts("p"));
        assert.equal(after.state, "acquired");
        if (after.state === "acquired") assert.equal(after.recovered, false);
      });
    }),
);

pgTest(
  "PostgresStore hands bodies out as plain Uint8Array views, not driver Buffers",
  () =>
    withSchema(async (schema) => {
      await withStore(schema, { max: 1 }, async (store) => {
        const claim = await store.claim("b", opts("b"));
        if (claim.state !== "acquired") throw new Error("not acquired");
        const body = new Uint8Array([0, 255, 1, 254, 92, 120]);
        await store.complete("b", claim.token, { ...ok, body });
        const replay = await store.claim("b", opts("b"));
        assert.equal(replay.state, "completed");
        if (replay.state !== "completed") return;
        const out = replay.response.body!;
        assert.equal(Object.getPrototypeOf(out), Uint8Array.prototype);
        assert.deepEqual([...out], [...body]);
        assert.deepEqual(replay.response.headers, ok.headers);
      });
    }),
);
