// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MysqlStore.transactional() in one process against the MariaDB/MySQL of
 * this machine: the handler's rows and the record commit together on one
 * connection or not at all; a request no store claimed gets a plain
 * transaction of its own. The crash, zombie and load proofs with real
 * processes are in `mysql_transaction_crash_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type mysql from "mysql2/promise";
import { idempotency } from "../../src/idempotency.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { MysqlStore } from "../../src/stores/mysql.ts";
import type { MysqlConnection } from "../../src/stores/mysql.ts";
import { post } from "../_support/http.ts";
import { deferred, waitFor } from "../_support/time.ts";
import {
  mariadbServerIgnore,
  mysqlPool,
  startMariadbServer,
} from "../_support/mariadb.ts";
import { integrationTest } from "../_support/services.ts";
import { myTest, withStore } from "./_mysql_fixtures.ts";

/** A migrated store and an `effects` table of the user's own, dropped afterwards. */
function withEffects(
  fn: (
    store: MysqlStore,
    pool: mysql.Pool,
    effects: string,
    table: string,
  ) => Promise<void>,
  flags = "FOUND_ROWS",
): Promise<void> {
  return withStore(
    { connectionLimit: 4, flags: [flags] },
    async (store, pool, table) => {
      const effects = `\`${table}_effects\``;
      await pool.query(
        `CREATE TABLE ${effects} (k VARCHAR(64) NOT NULL) ENGINE = InnoDB`,
      );
      try {
        await fn(store, pool, effects, table);
      } finally {
        await pool.query(`DROP TABLE ${effects}`);
      }
    },
  );
}

async function count(pool: mysql.Pool, effects: string): Promise<number> {
  const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM ${effects}`);
  return Number((rows as { n: number }[])[0]!.n);
}

function insert(tx: MysqlConnection, effects: string, request: Request) {
  const key = request.headers.get("idempotency-key") ?? "keyless";
  return tx.execute(`INSERT INTO ${effects} (k) VALUES (?)`, [key]);
}

for (const flags of ["FOUND_ROWS", "-FOUND_ROWS"]) {
  myTest(
    `MysqlStore.transactional() commits the handler's rows with the record; a retry replays (flags ${flags})`,
    () =>
      withEffects(async (store, pool, effects) => {
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
        assert.equal(retry.headers.get("idempotent-replayed"), "true");
        assert.deepEqual(await retry.json(), { order: 1 });
        assert.equal(runs, 1);
        assert.equal(await count(pool, effects), 1);
      }, flags),
  );
}

myTest(
  "MysqlStore.transactional(): until the commit, neither the handler's row nor the record is visible; then both are",
  () =>
    withEffects(async (store, pool, effects, table) => {
      const inserted = deferred();
      const go = deferred();
      const handler = idempotency(
        store.transactional(async (request, tx) => {
          await insert(tx, effects, request);
          inserted.resolve();
          await go.promise;
          return new Response("mine", { status: 201 });
        }),
        { scope: "global", store },
      );
      const answer = handler(post("k1"));
      await inserted.promise;
      assert.equal(await count(pool, effects), 0);
      const state = async () => {
        const [rows] = await pool.query(`SELECT state FROM \`${table}\``);
        return (rows as { state: string }[]).map((r) => r.state);
      };
      assert.deepEqual(await state(), ["in_flight"]);
      go.resolve();
      assert.equal((await answer).status, 201);
      assert.equal(await count(pool, effects), 1);
      assert.deepEqual(await state(), ["completed"]);
    }),
);

myTest(
  "MysqlStore.transactional(): a throw rolls the rows back and frees the key; the retry runs once",
  () =>
    withEffects(async (store, pool, effects) => {
      let fail = true;
      const handler = idempotency(
        store.transactional(async (request, tx) => {
          await insert(tx, effects, request);
          if (fail) throw new Error("boom");
          return new Response("second", { status: 201 });
        }),
        { scope: "global", store },
      );
      await assert.rejects(async () => await handler(post("k1")), /boom/);
      assert.equal(await count(pool, effects), 0);
      fail = false;
      const retry = await handler(post("k1"));
      assert.equal(retry.status, 201);
      assert.equal(await retry.text(), "second");
      assert.equal(await count(pool, effects), 1);
    }),
);

myTest(
  "MysqlStore.transactional(): a claim lost before the commit rolls everything back and answers 409",
  () =>
    withEffects(async (store, pool, effects, table) => {
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
      await pool.query(`UPDATE \`${table}\` SET token = 'another owner'`);
      go.resolve();
      const response = await answer;
      assert.equal(response.status, 409);
      await response.body?.cancel();
      assert.equal(await count(pool, effects), 0);
      const [rows] = await pool.query(
        `SELECT state, CONVERT(token USING utf8mb4) AS token FROM \`${table}\``,
      );
      assert.deepEqual(
        (rows as Record<string, unknown>[]).map((r) => ({ ...r })),
        [{ state: "in_flight", token: "another owner" }],
      );
      assert.ok(
        events.some((e) => e.type === "completed" && e.outcome === "lost"),
      );
    }),
);

myTest(
  "MysqlStore.transactional(): a keyless request gets a plain transaction: committed on return, rolled back on throw",
  () =>
    withEffects(async (store, pool, effects) => {
      let fail = false;
      const handler = idempotency(
        store.transactional(async (request, tx) => {
          await insert(tx, effects, request);
          if (fail) throw new Error("boom");
          return new Response("plain", { status: 200 });
        }),
        { scope: "global", store },
      );
      const keyless = () =>
        new Request("http://x/", { method: "POST", body: "{}" });
      const first = await handler(keyless());
      assert.equal(first.status, 200);
      assert.equal(await first.text(), "plain");
      assert.equal(await count(pool, effects), 1);
      fail = true;
      await assert.rejects(async () => await handler(keyless()), /boom/);
      assert.equal(await count(pool, effects), 1, "the throw rolled back");
      // Called directly, with no middleware at all: the same.
      fail = false;
      const direct = store.transactional(async (request, tx) => {
        await insert(tx, effects, request);
        return new Response("direct");
      });
      assert.equal(await (await direct(keyless())).text(), "direct");
      assert.equal(await count(pool, effects), 2);
    }),
);

myTest(
  "MysqlStore.transactional() refuses a pool of one and a handler that is not a function",
  async () => {
    const pool = mysqlPool({ connectionLimit: 1 });
    try {
      const store = new MysqlStore({ pool });
      assert.throws(
        () => store.transactional(() => new Response()),
        (error: unknown) =>
          error instanceof RangeError &&
          /at least 2 connections.*'connectionLimit' is 1/.test(error.message),
      );
      assert.throws(
        () => store.transactional(1 as never),
        TypeError,
      );
      const pair = mysqlPool({ connectionLimit: 2 });
      const two = new MysqlStore({ pool: pair });
      assert.equal(typeof two.transactional(() => new Response()), "function");
      await pair.end();
    } finally {
      await pool.end();
    }
  },
);

myTest(
  "MysqlStore.transactional(): the transaction's connection killed (KILL CONNECTION) before COMMIT answers 503, commits nothing, and the retry runs",
  () =>
    withEffects(async (store, pool, effects) => {
      const inserted = deferred<number>();
      const go = deferred();
      let runs = 0;
      const handler = idempotency(
        store.transactional(async (request, tx) => {
          runs++;
          await insert(tx, effects, request);
          if (runs === 1) {
            const [rows] = await tx.query("SELECT CONNECTION_ID() AS id");
            inserted.resolve((rows as { id: number }[])[0]!.id);
            await go.promise;
          }
          return new Response("ok", { status: 201 });
        }),
        { scope: "global", store },
      );
      const answer = handler(post("k1"));
      await pool.query(`KILL CONNECTION ${await inserted.promise}`);
      go.resolve();
      const response = await answer;
      assert.equal(response.status, 503);
      await response.body?.cancel();
      assert.equal(await count(pool, effects), 0);
      const retry = await handler(post("k1"));
      assert.equal(retry.status, 201);
      assert.equal(retry.headers.get("idempotent-replayed"), null);
      assert.equal(await count(pool, effects), 1);
    }),
);

integrationTest(
  "MysqlStore.transactional() through a SIGKILL of the server: killed before COMMIT nothing commits and the retry runs once; killed after it the retry replays",
  await mariadbServerIgnore(),
  async () => {
    await using server = await startMariadbServer();
    const pool = mysqlPool(
      { connectionLimit: 4, connectTimeout: 1000 },
      server.url,
    );
    try {
      const store = new MysqlStore({ pool, timeoutMs: 1000 });
      await store.migrate();
      await pool.query("CREATE TABLE effects (k VARCHAR(64) NOT NULL)");
      const inserted = deferred();
      const go = deferred();
      let hold = true;
      const handler = idempotency(
        store.transactional(async (request, tx) => {
          await insert(tx, "effects", request);
          if (hold) {
            inserted.resolve();
            await go.promise;
          }
          return new Response(`ran ${request.headers.get("idempotency-key")}`, {
            status: 201,
          });
        }),
        { scope: "global", store },
      );
      const answer = handler(post("before"));
      await inserted.promise;
      await server.kill();
      await server.restart();
      go.resolve();
      const failed = await answer;
      assert.equal(failed.status, 503);
      await failed.body?.cancel();
      hold = false;
      const retry = await untilNot503(() => handler(post("before")));
      assert.equal(retry.status, 201);
      assert.equal(retry.headers.get("idempotent-replayed"), null);
      assert.equal(await count(pool, "effects"), 1);

      assert.equal((await handler(post("after"))).status, 201);
      await server.kill();
      await server.restart();
      const replay = await untilNot503(() => handler(post("after")));
      assert.equal(replay.headers.get("idempotent-replayed"), "true");
      assert.equal(await replay.text(), "ran after");
      assert.equal(await count(pool, "effects"), 2);
    } finally {
      await pool.end().catch(() => {});
    }
  },
);

/** Sends until the answer is not 503 (the pool reconnecting): a wait for a state. */
async function untilNot503(
  send: () => Response | Promise<Response>,
): Promise<Response> {
  let last: Response | undefined;
  await waitFor("an answer other than 503", async () => {
    last = await send();
    if (last.status !== 503) return true;
    await last.body?.cancel();
    return false;
  });
  return last!;
}

myTest(
  "MysqlStore.transactional() refuses a request another store's middleware claimed: its rows could not commit with that record",
  () =>
    withEffects(async (store, pool, effects) => {
      let runs = 0;
      const handler = idempotency(
        store.transactional(async (request, tx) => {
          runs++;
          await insert(tx, effects, request);
          return new Response("ran", { status: 201 });
        }),
        { scope: "global", store: new MemoryStore() },
      );
      await assert.rejects(
        async () => await handler(post("k1")),
        (error: unknown) =>
          error instanceof TypeError &&
          /another store's middleware claimed it/.test(error.message),
      );
      assert.equal(runs, 0);
      assert.equal(await count(pool, effects), 0);
    }),
);
