// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The fault-injection suite on a real MysqlStore: a load with duplicates (200
 * keys, 3 requests each, 16 at a time) on a mariadbd of the test's own,
 * SIGSTOPped past `timeoutMs` a third of the way in (until five store
 * errors), SIGKILLed and restarted on the same data two thirds in. MariaDB
 * keeps every commit through the kill (`innodb_flush_log_at_trx_commit=1`),
 * so there is no window: a second execution of a key, an answer that is not
 * the handler's bytes or a problem, or a key still in flight half a lease
 * after the load is a failure; a 503 while the server is away is allowed
 * (and not counted as time in flight while the pool reconnects).
 *
 * @module
 */
import assert from "node:assert/strict";
import { MysqlStore } from "../../src/stores/mysql.ts";
import { integrationTest } from "../_support/services.ts";
import {
  mariadbServerIgnore,
  mysqlPool,
  startMariadbServer,
} from "../_support/mariadb.ts";
import { waitFor } from "../_support/time.ts";
import {
  assertNoHarm,
  duplicates,
  guardedApp,
  load,
  loadFigures,
  report,
  settle,
  tally,
} from "./_load.ts";

const privateIgnore = await mariadbServerIgnore();

integrationTest(
  "faults: MysqlStore under load with duplicates while its server is paused past timeoutMs, then SIGKILLed and restarted",
  privateIgnore,
  async () => {
    await using server = await startMariadbServer();
    const LEASE = 10_000;
    const pool = mysqlPool(
      { connectionLimit: 8, connectTimeout: 1000 },
      server.url,
    );
    try {
      const store = new MysqlStore({ pool, timeoutMs: 300 });
      await store.migrate();
      const { ledger, send, storeErrors } = guardedApp(store, LEASE);
      const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
      let faults = 0;
      const seen = tally();
      await load(send, ledger, {
        keys,
        duplicates: 3,
        concurrency: 16,
        async progress(done, total) {
          if (faults === 0 && done >= total / 3) {
            faults++;
            const before = storeErrors();
            server.pause();
            await waitFor(
              "store errors while paused",
              () => storeErrors() >= before + 5,
            );
            server.resume();
          } else if (faults === 1 && done >= (total * 2) / 3) {
            faults++;
            await server.kill();
            await server.restart();
          }
        },
      }, seen);
      assert.equal(faults, 2, "every fault was injected");
      const settled = await settle(
        send,
        ledger,
        keys,
        LEASE / 2,
        seen,
        16,
        30_000,
      );
      const dup = duplicates(ledger);
      report("mysql pause and kill", {
        faults,
        storeErrors: storeErrors(),
        ...loadFigures(seen, ledger, dup, settled),
      });
      assertNoHarm(dup, seen, settled);
    } finally {
      server.resume();
      await pool.end().catch(() => {});
    }
  },
);
