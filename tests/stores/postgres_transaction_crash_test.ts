// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's transactional mode with real processes
 * (`tests/_support/postgres_transaction_app.ts`): an app process SIGKILLed at chosen
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
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresStore,
} from "../_support/services.ts";
import { AppProcess } from "../faults/_servers.ts";
import {
  Control,
  post,
  settle,
  zombieTakeover,
} from "../_support/transaction_crash.ts";

const ignore = POSTGRES_IGNORE;
const LEASE = 1000;
const APP =
  new URL("../_support/postgres_transaction_app.ts", import.meta.url).pathname;

async function startApp(
  table: string,
  effects: string,
  control: Control,
): Promise<AppProcess & AsyncDisposable> {
  const app = new AppProcess(APP, [
    Deno.env.get("DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test",
    table,
    effects,
    control.url,
    String(LEASE),
  ], {});
  await app.port;
  return Object.assign(app, { [Symbol.asyncDispose]: () => app.kill() });
}

integrationTest(
  "PostgresStore.transactional(): an app SIGKILLed inside the handler, before COMMIT or right after it leaves exactly one effect, and the retry replays it when it exists",
  ignore,
  async () => {
    await using pg = await postgresStore("txn_crash", { max: 2 });
    const effects = `"${pg.schema}".effects`;
    await pg.sql.unsafe(
      `CREATE TABLE ${effects} (key text NOT NULL, pid int NOT NULL)`,
    );
    const table = `${pg.schema}.keys`;
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
      const rows = await pg.sql.unsafe(
        `SELECT pid FROM ${effects} WHERE key = $1`,
        [key],
      );
      assert.equal(
        rows.length,
        1,
        `exactly one effect when killed at ${point}`,
      );
      if (point === "committed") {
        // The effect committed with the record: the retry is its replay.
        assert.equal(rows[0]!.pid, a);
        assert.equal(retry.headers.get("idempotent-replayed"), "true");
        assert.equal(text, `${key} by ${a}`);
      } else {
        // Nothing of the killed run committed: the retry ran, once.
        assert.equal(rows[0]!.pid, b);
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
  "PostgresStore.transactional(): a zombie owner resumed after a takeover rolls back, its effect never appears, its client gets 409",
  ignore,
  async () => {
    await using pg = await postgresStore("txn_zombie", { max: 2 });
    const effects = `"${pg.schema}".effects`;
    await pg.sql.unsafe(
      `CREATE TABLE ${effects} (key text NOT NULL, pid int NOT NULL)`,
    );
    const table = `${pg.schema}.keys`;
    await using control = new Control();
    await using zombie = await startApp(table, effects, control);
    await using taker = await startApp(table, effects, control);
    await zombieTakeover(
      control,
      zombie,
      taker,
      async (key) =>
        (await pg.sql.unsafe(`SELECT pid FROM ${effects} WHERE key = $1`, [
          key,
        ])).map((r) => r.pid as number),
    );
  },
);

integrationTest(
  "PostgresStore.transactional(): two processes, hundreds of keys sent twice to each, exactly one effect row per key",
  ignore,
  async () => {
    await using pg = await postgresStore("txn_load", { max: 2 });
    const effects = `"${pg.schema}".effects`;
    await pg.sql.unsafe(
      `CREATE TABLE ${effects} (key text NOT NULL, pid int NOT NULL)`,
    );
    const table = `${pg.schema}.keys`;
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
    const [row] = await pg.sql.unsafe(
      `SELECT count(*)::int AS n, count(DISTINCT key)::int AS keys FROM ${effects}`,
    );
    assert.deepEqual({ ...row }, { n: KEYS, keys: KEYS });
    for (const [key, texts] of answers) {
      assert.equal(new Set(texts).size, 1, `one answer for ${key}`);
    }
  },
);
