// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MysqlStore against the MariaDB/MySQL of this machine (`MYSQL_URL`): the
 * conformance suite twice, with mysql2's CLIENT_FOUND_ROWS on (its default)
 * and off, so that no outcome rests on an affected-rows count; concurrent
 * claims and takeovers. Tables, sweeps, strict mode and unreadable rows are
 * in `mysql_table_test.ts`, faults in `mysql_faults_test.ts`.
 *
 * Every test works on a table of its own, dropped afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MysqlStore } from "../../src/stores/mysql.ts";
import { storeConformance } from "../../src/testing/testing.ts";
import type { PoisonKind } from "../../src/testing/testing.ts";
import { uniquePrefix } from "../_support/services.ts";
import { mysqlPool } from "../_support/mariadb.ts";
import { sleep } from "../_support/time.ts";
import {
  dropStore,
  ignore,
  myTest,
  opts,
  plant,
  untilPast,
  withStore,
} from "./_mysql_fixtures.ts";

// --- the shared suite, under both affected-rows flags -----------------------

for (const flags of ["FOUND_ROWS", "-FOUND_ROWS"]) {
  storeConformance({
    name: `MysqlStore (flags ${flags})`,
    ignore,
    leaseMs: 300,
    async setup() {
      const pool = mysqlPool({ connectionLimit: 10, flags: [flags] });
      const table = uniquePrefix("myconf");
      const store = new MysqlStore({ pool, table });
      await store.migrate();
      return {
        store,
        elapse: sleep,
        async poison(slot: string, kind: PoisonKind) {
          await plant(pool, table, slot, kind);
        },
        async teardown() {
          await dropStore(pool, table);
          await pool.end();
        },
      };
    },
  });
}

// --- concurrency -------------------------------------------------------------

for (const flags of ["FOUND_ROWS", "-FOUND_ROWS"]) {
  myTest(
    `MysqlStore gives one of 50 concurrent claims on one slot, over 25 connections, the slot (flags ${flags})`,
    () =>
      withStore({ connectionLimit: 25, flags: [flags] }, async (store) => {
        for (let round = 0; round < 3; round++) {
          const slot = `race-${round}`;
          const results = await Promise.all(
            Array.from(
              { length: 50 },
              (_, i) => store.claim(slot, opts(`${i}`)),
            ),
          );
          const winners = results.flatMap((r, i) =>
            r.state === "acquired" ? [i] : []
          );
          assert.equal(winners.length, 1);
          for (const r of results) {
            if (r.state === "in_flight") {
              assert.equal(r.fingerprint, `${winners[0]}`);
            } else assert.equal(r.state, "acquired");
          }
        }
      }),
  );

  myTest(
    `MysqlStore gives one of 20 concurrent takeovers of an expired lease the slot (flags ${flags})`,
    () =>
      withStore(
        { connectionLimit: 20, flags: [flags] },
        async (store, pool, table) => {
          for (let round = 0; round < 3; round++) {
            const slot = `takeover-${round}`;
            const first = await store.claim(slot, opts("old", { leaseMs: 1 }));
            assert.equal(first.state, "acquired");
            await untilPast(pool, table, slot);
            const results = await Promise.all(
              Array.from({ length: 20 }, (_, i) =>
                store.claim(slot, opts(`fp-${i}`))),
            );
            const winners = results.filter((r) =>
              r.state === "acquired"
            );
            assert.equal(winners.length, 1, JSON.stringify(results));
            assert.equal(
              winners[0]?.state === "acquired" && winners[0].recovered,
              true,
            );
            for (const r of results) {
              if (r.state === "in_flight") {
                assert.match(r.fingerprint ?? "", /^fp-/);
              }
            }
          }
        },
      ),
  );
}
