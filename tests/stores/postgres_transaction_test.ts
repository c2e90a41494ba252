// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's transactional mode, in one process against the
 * PostgreSQL of this machine: the handler's rows and the record commit
 * together or not at all. Every test works in a schema of its own. The
 * crash, zombie and load proofs with real processes are in
 * `postgres_txn_crash_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Hono } from "hono";
import type { TransactionSql } from "postgres";
import { idempotency } from "../../src/idempotency.ts";
import { idempotent } from "../../src/hono.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { FailoverStore } from "../../src/stores/failover.ts";
import {
  PostgresStore,
  type PostgresStoreOptions,
} from "../../src/stores/postgres.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  type TestSchema,
} from "../_support/services.ts";
import { deferred, waitFor } from "../_support/time.ts";
import { post } from "../_support/http.ts";

const ignore = POSTGRES_IGNORE;

/** A schema with a migrated store and an `effects` table of the user's own. */
async function setup(
  label: string,
  options: { max?: number; store?: Partial<PostgresStoreOptions> } = {},
): Promise<TestSchema & { store: PostgresStore; effects: string }> {
  const pg = await postgresSchema(label, { max: options.max ?? 4 });
  const effects = `"${pg.schema}".effects`;
  await pg.sql.unsafe(`CREATE TABLE ${effects} (key text NOT NULL, n int)`);
  const store = new PostgresStore({
    sql: pg.sql,
    table: `${pg.schema}.keys`,
    ...options.store,
  });
  await store.migrate();
  return { ...pg, store, effects };
}

async function count(pg: TestSchema, effects: string): Promise<number> {
  const [row] = await pg.sql.unsafe(
    `SELECT count(*)::int AS n FROM ${effects}`,
  );
  return row!.n as number;
}

/** The handler's INSERT of one effect row, keyed by the request's key. */
function insert(tx: TransactionSql, effects: string, request: Request) {
  return tx.unsafe(`INSERT INTO ${effects} (key) VALUES ($1)`, [
    request.headers.get("idempotency-key"),
  ]);
}

integrationTest(
  "PostgresStore.transactional() commits the handler's rows with the record; a retry replays",
  ignore,
  async () => {
    await using pg = await setup("txn_commit");
    const { store, effects } = pg;
    let runs = 0;
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        runs++;
        await insert(tx, effects, request);
        return Response.json({ order: runs }, { status: 201 });
      }),
      { scope: "global", store },
    );
    const first = await handler(post("k1"));
    assert.equal(first.status, 201);
    assert.deepEqual(await first.json(), { order: 1 });
    const retry = await handler(post("k1"));
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(await retry.json(), { order: 1 });
    assert.equal(runs, 1);
    assert.equal(await count(pg, effects), 1);
  },
);

integrationTest(
  "PostgresStore: a handler that opens no transaction is settled the plain way",
  ignore,
  async () => {
    await using pg = await setup("txn_plain");
    const { store, effects } = pg;
    const handler = idempotency(async (request) => {
      await pg.sql.unsafe(`INSERT INTO ${effects} (key) VALUES ($1)`, [
        request.headers.get("idempotency-key"),
      ]);
      return new Response("done", { status: 201 });
    }, { scope: "global", store });
    assert.equal((await handler(post("k1"))).status, 201);
    const retry = await handler(post("k1"));
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(await retry.text(), "done");
    assert.equal(await count(pg, effects), 1);
  },
);

integrationTest(
  "PostgresStore.transactional(): a throw rolls the rows back and frees the key",
  ignore,
  async () => {
    await using pg = await setup("txn_throw");
    const { store, effects } = pg;
    let fail = true;
    const events: IdempotencyEvent[] = [];
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        await insert(tx, effects, request);
        if (fail) throw new Error("boom");
        return new Response("ok", { status: 201 });
      }),
      { scope: "global", store, onEvent: (event) => events.push(event) },
    );
    await assert.rejects(async () => await handler(post("k1")), /boom/);
    assert.equal(await count(pg, effects), 0);
    assert.ok(
      events.some((e) => e.type === "released" && e.outcome === "applied"),
    );
    fail = false;
    const retry = await handler(post("k1"));
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get("idempotent-replayed"), null);
    assert.equal(await count(pg, effects), 1);
  },
);

integrationTest(
  "PostgresStore.transactional(): a response that is not cacheable rolls the rows back with the released key",
  ignore,
  async () => {
    await using pg = await setup("txn_4xx");
    const { store, effects } = pg;
    let status = 400;
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        await insert(tx, effects, request);
        return new Response(null, { status });
      }),
      { scope: "global", store },
    );
    assert.equal((await handler(post("k1"))).status, 400);
    assert.equal(await count(pg, effects), 0);
    status = 201;
    assert.equal((await handler(post("k1"))).status, 201);
    assert.equal(await count(pg, effects), 1);
  },
);

integrationTest(
  "PostgresStore.transactional(): a claim lost before the commit rolls everything back and answers 409",
  ignore,
  async () => {
    await using pg = await setup("txn_lost");
    const { store, effects } = pg;
    const inserted = deferred();
    const go = deferred();
    const events: IdempotencyEvent[] = [];
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        await insert(tx, effects, request);
        inserted.resolve();
        await go.promise;
        return new Response("mine", { status: 201 });
      }),
      { scope: "global", store, onEvent: (event) => events.push(event) },
    );
    const answer = handler(post("k1"));
    await inserted.promise;
    // Another owner takes the slot over (as after an expired lease).
    const taken = await pg.sql.unsafe(
      `UPDATE ${store.table} SET token = 'another owner'`,
    );
    assert.equal(taken.count, 1);
    go.resolve();
    const response = await answer;
    assert.equal(response.status, 409);
    assert.equal(await count(pg, effects), 0);
    const [row] = await pg.sql.unsafe(
      `SELECT state, token FROM ${store.table}`,
    );
    assert.deepEqual({ ...row }, {
      state: "in_flight",
      token: "another owner",
    });
    assert.ok(
      events.some((e) => e.type === "completed" && e.outcome === "lost"),
    );
  },
);

integrationTest(
  "PostgresStore.transactional(): a body over maxResponseBytes completes without its body in the transaction",
  ignore,
  async () => {
    await using pg = await setup("txn_large");
    const { store, effects } = pg;
    const big = "x".repeat(5000);
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        await insert(tx, effects, request);
        return new Response(big, { status: 201 });
      }),
      { scope: "global", store, maxResponseBytes: 1000 },
    );
    assert.equal(await (await handler(post("k1"))).text(), big);
    const retry = await handler(post("k1"));
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(await retry.text(), "");
    assert.equal(await count(pg, effects), 1);
  },
);

integrationTest(
  "PostgresStore.transactional(): a body stream that errors completes without its body, its rows committed",
  ignore,
  async () => {
    await using pg = await setup("txn_stream");
    const { store, effects } = pg;
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        await insert(tx, effects, request);
        let pulls = 0;
        return new Response(
          new ReadableStream<Uint8Array>({
            pull(controller) {
              if (pulls++ === 0) {
                controller.enqueue(new TextEncoder().encode("part"));
              } else controller.error(new Error("broken"));
            },
          }),
          { status: 201 },
        );
      }),
      { scope: "global", store },
    );
    const live = await handler(post("k1"));
    await assert.rejects(live.text());
    const retry = await handler(post("k1"));
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(await retry.text(), "");
    const [row] = await pg.sql.unsafe(`SELECT omitted FROM ${store.table}`);
    assert.equal(row!.omitted, "stream_error");
    assert.equal(await count(pg, effects), 1);
  },
);

integrationTest(
  "PostgresStore.transactional(): a serialization failure at commit answers 503 and the retry runs once",
  ignore,
  async () => {
    await using pg = await setup("txn_serial", {
      store: { transaction: { isolation: "serializable" } },
    });
    const { store, effects } = pg;
    const read = deferred();
    const go = deferred();
    let runs = 0;
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        runs++;
        // Write skew: read the other's rows, write one of ours.
        await tx.unsafe(`SELECT count(*) FROM ${effects} WHERE n = 2`);
        await tx.unsafe(`INSERT INTO ${effects} (key, n) VALUES ($1, 1)`, [
          request.headers.get("idempotency-key"),
        ]);
        read.resolve();
        await go.promise;
        return new Response("ok", { status: 201 });
      }),
      { scope: "global", store },
    );
    const answer = handler(post("k1"));
    await read.promise;
    await pg.sql.begin("isolation level serializable", async (other) => {
      await other.unsafe(`SELECT count(*) FROM ${effects} WHERE n = 1`);
      await other.unsafe(`INSERT INTO ${effects} (key, n) VALUES ('x', 2)`);
    });
    go.resolve();
    const response = await answer;
    assert.equal(response.status, 503);
    assert.equal(await count(pg, effects), 1); // the other's row alone
    // The slot was freed: the retry runs, once.
    go.resolve();
    const retry = await handler(post("k1"));
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get("idempotent-replayed"), null);
    assert.equal(runs, 2);
    assert.equal(await count(pg, effects), 2);
  },
);

integrationTest(
  "PostgresStore.transactional(): a backend terminated before COMMIT answers 503, commits nothing, and the retry runs",
  ignore,
  async () => {
    await using pg = await setup("txn_terminated");
    const { effects } = pg;
    // The store's sql, with a view of each transaction's end: the test lets
    // the handler return only once postgres.js has seen the connection close
    // (a statement sent while it closes is upstream's race, see the doc).
    const ends: { rejected: boolean }[] = [];
    const sql = pg.sql;
    const store = new PostgresStore({
      table: `${pg.schema}.keys`,
      sql: {
        unsafe: sql.unsafe.bind(sql),
        options: sql.options,
        begin(options, fn) {
          const end = { rejected: false };
          ends.push(end);
          const done = sql.begin(options, fn);
          done.catch(() => end.rejected = true);
          return done;
        },
      },
    });
    const inserted = deferred<number>();
    const go = deferred();
    let runs = 0;
    const handler = idempotency(
      store.transactional(async (request, tx) => {
        runs++;
        await insert(tx, effects, request);
        if (runs === 1) {
          const [row] = await tx.unsafe("SELECT pg_backend_pid() AS pid");
          inserted.resolve(row!.pid as number);
          await go.promise;
        }
        return new Response("ok", { status: 201 });
      }),
      { scope: "global", store },
    );
    const answer = handler(post("k1"));
    const pid = await inserted.promise;
    await pg.sql.unsafe("SELECT pg_terminate_backend($1)", [pid]);
    await waitFor(
      "postgres.js to see the connection close",
      () => ends[0]!.rejected,
    );
    go.resolve();
    const response = await answer;
    assert.equal(response.status, 503);
    assert.equal(await count(pg, effects), 0);
    const retry = await handler(post("k1"));
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get("idempotent-replayed"), null);
    assert.equal(await count(pg, effects), 1);
  },
);

integrationTest(
  "PostgresStore.transactional() and transaction() refuse a pool of one with a clear error",
  ignore,
  async () => {
    await using pg = await setup("txn_pool1", { max: 1 });
    const { store, effects } = pg;
    const refusal = (error: Error) => {
      assert.ok(error instanceof RangeError);
      assert.match(
        error.message,
        /at least 2 connections.*postgres\(url, \{ max: 2 \}\).*'max' is 1/,
      );
      return true;
    };
    // At wrapping, before any request.
    assert.throws(
      () =>
        store.transactional(async (request, tx) => {
          await insert(tx, effects, request);
          return new Response("ok", { status: 201 });
        }),
      refusal,
    );
    // A handler that asks for the transaction itself: at its first request.
    const handler = idempotency(async (request) => {
      await store.transaction(request);
      return new Response("ok", { status: 201 });
    }, { scope: "global", store });
    await assert.rejects(async () => await handler(post("k1")), refusal);
    // The key was freed, and the plain path still works on a pool of one.
    const plain = idempotency(() => new Response("ok"), {
      scope: "global",
      store,
    });
    assert.equal((await plain(post("k1"))).status, 200);
  },
);

integrationTest(
  "PostgresStore.transaction() refuses a request its middleware did not claim (FailoverStore, unguarded)",
  ignore,
  async () => {
    await using pg = await setup("txn_unclaimed");
    const { store } = pg;
    const failover = new FailoverStore({
      primary: new MemoryStore(),
      fallback: store,
    });
    const handler = idempotency(
      store.transactional(() => new Response("ok", { status: 201 })),
      { scope: "global", store: failover },
    );
    await assert.rejects(
      async () => await handler(post("k1")),
      (error: Error) => {
        assert.ok(error instanceof TypeError);
        assert.match(error.message, /No transaction for this request/);
        return true;
      },
    );
    await assert.rejects(store.transaction(post("k2")), TypeError);
  },
);

integrationTest(
  "PostgresStore.transaction() in a Hono route commits the route's rows with the record",
  ignore,
  async () => {
    await using pg = await setup("txn_hono");
    const { store, effects } = pg;
    const app = new Hono();
    app.post("/orders", idempotent({ scope: "global", store }), async (c) => {
      const tx = await store.transaction(c.req.raw);
      await insert(tx, effects, c.req.raw);
      return c.json({ ok: true }, 201);
    });
    const send = () =>
      app.request("/orders", {
        method: "POST",
        headers: { "idempotency-key": "h1" },
        body: "{}",
      });
    assert.equal((await send()).status, 201);
    const retry = await send();
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(await count(pg, effects), 1);
  },
);

Deno.test("PostgresStore rejects a bad transaction option", () => {
  const sql = { unsafe: () => Promise.resolve([]) } as never;
  assert.throws(
    () =>
      new PostgresStore({
        sql,
        transaction: { isolation: "chaos" as "serializable" },
      }),
    TypeError,
  );
  assert.throws(
    () => new PostgresStore({ sql, transaction: { statementTimeoutMs: -1 } }),
    RangeError,
  );
});
