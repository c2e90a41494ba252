// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MysqlStore when its server fails, on a mariadbd of the test's own
 * (`tests/_support/mariadb.ts`): paused with SIGSTOP past `timeoutMs` (a
 * claim that timed out and committed anyway is undone), SIGKILLed and
 * restarted on the same data (the pool reconnects, nothing committed is
 * lost), a refused connection, a row locked past `timeoutMs` on the shared
 * server. Under load with duplicates: `tests/faults/mysql_faults_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MysqlStore } from "../../src/stores/mysql.ts";
import { StoreError } from "../../src/store.ts";
import type { StoreEvent } from "../../src/store.ts";
import { post } from "../_support/http.ts";
import { freePort, integrationTest } from "../_support/services.ts";
import {
  mariadbServerIgnore,
  mysqlPool,
  startMariadbServer,
} from "../_support/mariadb.ts";
import { waitFor } from "../_support/time.ts";
import { untilRunsAgain, warmCountingHandler } from "../_support/stores.ts";
import { myTest, ok, opts, untilPast, withStore } from "./_mysql_fixtures.ts";

const privateIgnore = await mariadbServerIgnore();

integrationTest(
  "MysqlStore on a server paused past timeoutMs: 503, and once it resumes the key runs again long before the lease ends",
  privateIgnore,
  async () => {
    await using server = await startMariadbServer();
    const pool = mysqlPool({ connectionLimit: 1 }, server.url);
    const events: StoreEvent[] = [];
    try {
      const store = new MysqlStore({
        pool,
        timeoutMs: 300,
        onEvent: (event) => events.push(event),
      });
      await store.migrate();
      const { handler, runs } = await warmCountingHandler(store);
      server.pause();
      const failed = await handler(post("late-1"));
      assert.equal(failed.status, 503);
      await failed.body?.cancel();
      server.resume();
      // The claim's read was stuck past the deadline: its CALL was never
      // sent (or, sent, landed and was undone); either way the 30 s lease
      // is not waited for.
      await untilRunsAgain(handler, "late-1");
      assert.equal(runs(), 2);
      assert.ok(events.every((e) => e.outcome === "applied"), String(events));
    } finally {
      server.resume();
      await pool.end().catch(() => {});
    }
  },
);

myTest(
  "MysqlStore undoes a claim whose CALL timed out on a locked row and committed once the lock went",
  () =>
    withStore({ connectionLimit: 3 }, async (store, pool, table) => {
      const events: StoreEvent[] = [];
      const subscribed: StoreEvent[] = [];
      const timed = new MysqlStore({
        pool,
        table,
        timeoutMs: 300,
        onEvent: (event) => events.push(event),
      });
      timed.subscribe((event) => subscribed.push(event));
      const old = await store.claim("late", opts("old", { leaseMs: 1 }));
      assert.equal(old.state, "acquired");
      await untilPast(pool, table, "late"); // free: the read hands on to the CALL
      const admin = await pool.getConnection();
      try {
        await admin.query("START TRANSACTION");
        await admin.query(
          `SELECT 1 FROM \`${table}\` WHERE slot = 'late' FOR UPDATE`,
        );
        await assert.rejects(
          () => timed.claim("late", opts("new")),
          (error: unknown) =>
            error instanceof StoreError && /300 ms/.test(error.message),
        );
      } finally {
        await admin.query("ROLLBACK");
        admin.release();
      }
      // The CALL takes the row once the lock is gone; its undo frees it.
      await waitFor("the late claim's undo", () => events.length > 0);
      assert.deepEqual(events, [{
        type: "undo",
        slot: "late",
        outcome: "applied",
      }]);
      assert.deepEqual(subscribed, events, "subscribe() is told the same");
      const next = await store.claim("late", opts("next"));
      assert.equal(next.state, "acquired");
      assert.equal(next.state === "acquired" && next.recovered, false);
    }),
);

integrationTest(
  "MysqlStore after a SIGKILL of its server: StoreError while it is down, then the same pool reconnects and every commit survived",
  privateIgnore,
  async () => {
    await using server = await startMariadbServer();
    const pool = mysqlPool(
      { connectionLimit: 2, connectTimeout: 1000 },
      server.url,
    );
    try {
      const store = new MysqlStore({ pool, timeoutMs: 1000 });
      await store.migrate();
      const done = await store.claim("done", opts("d"));
      const live = await store.claim("live", opts("l"));
      assert.ok(done.state === "acquired" && live.state === "acquired");
      assert.equal(await store.complete("done", done.token, ok), "applied");
      await server.kill();
      await assert.rejects(
        () => store.extend("live", live.token, 30_000),
        (error: unknown) =>
          error instanceof StoreError && error.operation === "extend" &&
          /outcome unknown/.test(error.message),
      );
      await server.restart();
      await waitFor("the pool to reconnect", async () => {
        try {
          return (await store.claim("done", opts("d"))).state === "completed";
        } catch {
          return false;
        }
      });
      const replay = await store.claim("done", opts("d"));
      assert.equal(replay.state, "completed");
      if (replay.state === "completed") {
        assert.deepEqual(replay.response.body, ok.body);
      }
      assert.equal(await store.extend("live", live.token, 30_000), "applied");
      assert.equal(await store.complete("live", live.token, ok), "applied");
    } finally {
      await pool.end().catch(() => {});
    }
  },
);

myTest(
  "MysqlStore throws StoreError at once when the connection is refused",
  async () => {
    const pool = mysqlPool(
      { connectionLimit: 1 },
      `mysql://root@127.0.0.1:${freePort()}/test`,
    );
    try {
      const store = new MysqlStore({ pool });
      await assert.rejects(
        () => store.claim("refused", opts("r")),
        (error: unknown) => {
          assert.ok(error instanceof StoreError);
          assert.equal(error.operation, "claim");
          assert.doesNotMatch(error.message, /No answer within/);
          return true;
        },
      );
      await assert.rejects(
        () => store.complete("refused", "token", ok),
        (error: unknown) =>
          error instanceof StoreError && /outcome unknown/.test(error.message),
      );
    } finally {
      await pool.end();
    }
  },
);

myTest(
  "MysqlStore gives up after timeoutMs on a row another session locks; the server's innodb_lock_wait_timeout stops the claim too",
  () =>
    withStore({ connectionLimit: 2 }, async (store, pool, table) => {
      const timed = new MysqlStore({ pool, table, timeoutMs: 300 });
      const claim = await store.claim("locked", opts("l", { leaseMs: 1 }));
      assert.equal(claim.state, "acquired");
      await untilPast(pool, table, "locked"); // the next claim takes the row over
      const admin = await pool.getConnection();
      try {
        await admin.query("START TRANSACTION");
        await admin.query(
          `SELECT 1 FROM \`${table}\` WHERE slot = 'locked' FOR UPDATE`,
        );
        const other = mysqlPool({ connectionLimit: 1 });
        try {
          await other.query("SET SESSION innodb_lock_wait_timeout = 1");
          const bounded = new MysqlStore({
            pool: other,
            table,
            timeoutMs: 300,
          });
          await assert.rejects(
            () => bounded.claim("locked", opts("l")),
            (error: unknown) =>
              error instanceof StoreError && /300 ms/.test(error.message),
          );
          // The server gives up on its own: the next call on that one
          // connection answers once the lock wait ended (ER_LOCK_WAIT_TIMEOUT).
          await waitFor("the server to end the lock wait", async () => {
            const [rows] = await other.query("SELECT 1 AS one");
            return (rows as { one: number }[])[0]?.one === 1;
          });
        } finally {
          await other.end();
        }
        await assert.rejects(
          () => timed.claim("locked", opts("l")),
          (error: unknown) =>
            error instanceof StoreError && error.operation === "claim",
        );
      } finally {
        await admin.query("ROLLBACK");
        admin.release();
      }
      // The pool still works, and the free row is taken over.
      await waitFor(
        "the row to be free again",
        async () =>
          (await store.claim("locked", opts("l"))).state === "acquired",
      );
    }),
);
