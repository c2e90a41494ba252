// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MysqlStore's transactional mode with real processes
 * (`tests/_support/mysql_transaction_app.ts`), as PostgresStore's is proved
 * in `postgres_transaction_crash_test.ts`: an app process SIGKILLed at chosen
 * points, a zombie SIGSTOPped past its lease, and two processes under load.
 * The points are gates of the test's own control server: the app reports
 * each and waits there for the test's word, so nothing here sleeps for a
 * duration; the test waits for states (a point reached, a lease run out as
 * the database sees it). What is counted is the user's table: exactly one
 * effect row per key, whatever happened.
 *
 * @module
 */

import assert from "node:assert/strict";
import type mysql from "mysql2/promise";
import { integrationTest, uniquePrefix } from "../_support/services.ts";
import { MYSQL_IGNORE, MYSQL_URL, mysqlPool } from "../_support/mariadb.ts";
import { MysqlStore } from "../../src/stores/mysql.ts";
import { dropStore } from "./_mysql_fixtures.ts";
import { AppProcess } from "../faults/_servers.ts";
import {
  Control,
  post,
  settle,
  zombieTakeover,
} from "../_support/transaction_crash.ts";

const ignore = MYSQL_IGNORE;
const LEASE = 1000;
const APP =
  new URL("../_support/mysql_transaction_app.ts", import.meta.url).pathname;

async function startApp(
  table: string,
  effects: string,
  control: Control,
): Promise<AppProcess & AsyncDisposable> {
  const app = new AppProcess(APP, [
    MYSQL_URL,
    table,
    effects,
    control.url,
    String(LEASE),
  ], {});
  await app.port;
  return Object.assign(app, { [Symbol.asyncDispose]: () => app.kill() });
}

/** A migrated store's table and an effects table, dropped afterwards. */
async function tables(label: string): Promise<
  AsyncDisposable & { pool: mysql.Pool; table: string; effects: string }
> {
  const pool = mysqlPool({ connectionLimit: 2 });
  const table = uniquePrefix(label);
  const effects = `${table}_effects`;
  await new MysqlStore({ pool, table }).migrate();
  await pool.query(
    `CREATE TABLE \`${effects}\` (k VARCHAR(64) NOT NULL, pid INT NOT NULL)`,
  );
  return {
    pool,
    table,
    effects,
    async [Symbol.asyncDispose]() {
      await pool.query(`DROP TABLE IF EXISTS \`${effects}\``);
      await dropStore(pool, table);
      await pool.end();
    },
  };
}

/** The pids of the effect rows of `key`. */
async function effectsOf(
  db: { pool: mysql.Pool; effects: string },
  key: string,
): Promise<number[]> {
  const [rows] = await db.pool.execute(
    `SELECT pid FROM \`${db.effects}\` WHERE k = ?`,
    [key],
  );
  return (rows as { pid: number }[]).map((r) => r.pid);
}

integrationTest(
  "MysqlStore.transactional(): an app SIGKILLed inside the handler, before COMMIT or right after it leaves exactly one effect, and the retry replays it when it exists",
  ignore,
  async () => {
    await using db = await tables("txn_crash");
    const { table, effects } = db;
    await using control = new Control();
    await using survivor = await startApp(table, effects, control);
    const b = survivor.child.pid;

    for (const point of ["inserted", "captured", "committed"] as const) {
      const key = `crash-${point}`;
      await using victim = await startApp(table, effects, control);
      const a = victim.child.pid;
      if (point !== "committed") control.hold(point, key, a);
      const first = post(await victim.port, key).catch(() => null);
      await control.reachedBy(point, key, a);
      await victim.kill();
      await first;

      const retry = await settle(await survivor.port, key);
      assert.equal(retry.status, 201, point);
      const text = await retry.text();
      const rows = await effectsOf(db, key);
      assert.equal(
        rows.length,
        1,
        `exactly one effect when killed at ${point}`,
      );
      if (point === "committed") {
        // The effect committed with the record: the retry is its replay.
        assert.equal(rows[0], a);
        assert.equal(retry.headers.get("idempotent-replayed"), "true");
        assert.equal(text, `${key} by ${a}`);
      } else {
        // Nothing of the killed run committed: the retry ran, once.
        assert.equal(rows[0], b);
        assert.equal(retry.headers.get("idempotent-replayed"), null);
        assert.equal(text, `${key} by ${b}`);
      }
      const again = await post(await survivor.port, key);
      assert.equal(again.headers.get("idempotent-replayed"), "true");
      assert.equal(await again.text(), text);
    }
  },
);

integrationTest(
  "MysqlStore.transactional(): a zombie owner resumed after a takeover rolls back, its effect never appears, its client gets 409",
  ignore,
  async () => {
    await using db = await tables("txn_zombie");
    const { table, effects } = db;
    await using control = new Control();
    await using zombie = await startApp(table, effects, control);
    await using taker = await startApp(table, effects, control);
    await zombieTakeover(control, zombie, taker, (key) => effectsOf(db, key));
  },
);

integrationTest(
  "MysqlStore.transactional(): two processes, hundreds of keys sent twice to each, exactly one effect row per key",
  ignore,
  async () => {
    await using db = await tables("txn_load");
    const { table, effects } = db;
    await using control = new Control();
    await using one = await startApp(table, effects, control);
    await using two = await startApp(table, effects, control);
    const ports = [await one.port, await two.port];
    const KEYS = 300;
    const keys = Array.from({ length: KEYS }, (_, i) => `load-${i}`);
    const answers = new Map<string, string[]>();
    let next = 0;
    // 16 clients; each sends one key to both processes, twice, at once.
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < keys.length) {
        const key = keys[next++]!;
        const sends = [...ports, ...ports].map(async (port) => {
          const response = await settle(port, key);
          assert.equal(response.status, 201);
          return await response.text();
        });
        answers.set(key, await Promise.all(sends));
      }
    }));
    const [rows] = await db.pool.query(
      `SELECT COUNT(*) AS n, COUNT(DISTINCT k) AS \`keys\` FROM \`${effects}\``,
    );
    const [row] = rows as { n: number; keys: number }[];
    assert.deepEqual({ n: Number(row!.n), keys: Number(row!.keys) }, {
      n: KEYS,
      keys: KEYS,
    });
    for (const [key, texts] of answers) {
      assert.equal(new Set(texts).size, 1, `one answer for ${key}`);
    }
  },
);
