// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the MysqlStore tests share: a table (and a migrated store) per test
 * in the shared database, the claim options and response they write, and
 * rows planted that no MysqlStore wrote.
 *
 * @module
 */

import type mysql from "mysql2/promise";
import { MysqlStore, type MysqlStoreOptions } from "../../src/stores/mysql.ts";
import type { PoisonKind } from "../../src/testing/testing.ts";
import { integrationTest, uniquePrefix } from "../_support/services.ts";
import { MYSQL_IGNORE, mysqlPool } from "../_support/mariadb.ts";
import { waitFor } from "../_support/time.ts";

export { ok, opts } from "./_postgres_fixtures.ts";

/** Why the tests on the real MySQL/MariaDB are skipped, or false when they run. */
export const ignore = MYSQL_IGNORE;

/** A test that needs the real MySQL/MariaDB. */
export function myTest(name: string, fn: () => Promise<void>): void {
  integrationTest(name, ignore, fn);
}

/** Drops a store's table and its claim procedure. */
export async function dropStore(
  pool: mysql.Pool,
  table: string,
): Promise<void> {
  await pool.query(`DROP PROCEDURE IF EXISTS \`${table}_claim_v1\``);
  await pool.query(`DROP TABLE IF EXISTS \`${table}\``);
}

/**
 * A migrated MysqlStore on a table of the test's own, over a pool of its
 * own (`pool` options: `flags`, `connectionLimit`), dropped and ended
 * afterwards.
 */
export async function withStore(
  pool: mysql.PoolOptions,
  fn: (store: MysqlStore, pool: mysql.Pool, table: string) => Promise<void>,
  options: Partial<MysqlStoreOptions> = {},
): Promise<void> {
  const db = mysqlPool(pool);
  const table = uniquePrefix("my");
  try {
    const store = new MysqlStore({ pool: db, table, ...options });
    await store.migrate();
    await fn(store, db, table);
  } finally {
    await dropStore(db, table).catch(() => {});
    await db.end();
  }
}

/**
 * Waits until the row of `slot` is past its lease (`column` `lease_until`) or
 * its TTL (`expires_at`) on the server's clock: a state, not a duration.
 */
export async function untilPast(
  pool: mysql.Pool,
  table: string,
  slot: string,
  column: "lease_until" | "expires_at" = "lease_until",
): Promise<void> {
  await waitFor(`${slot}'s ${column} to pass`, async () => {
    const [rows] = await pool.execute(
      `SELECT ${column} <= UTC_TIMESTAMP(6) AS past FROM \`${table}\` WHERE slot = ?`,
      [slot],
    );
    return (rows as { past: number }[])[0]?.past === 1;
  });
}

/** The kinds of row that no MysqlStore writes. */
export type Plant = PoisonKind | "no_deadline" | "bad_headers" | "null_status";

/** Writes a row at `slot` that no MysqlStore wrote. */
export async function plant(
  pool: mysql.Pool,
  table: string,
  slot: string,
  kind: Plant,
): Promise<void> {
  const later = "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR";
  const before = "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND";
  const rows: Record<Plant, [columns: string, values: string]> = {
    garbage: [
      "version, state, fingerprint, token, lease_until, expires_at, headers",
      `1, 'x?!', NULL, NULL, ${before}, ${later}, '{"not":"pairs"}'`,
    ],
    truncated: [
      "version, state, fingerprint, token, expires_at, status, headers, body, omitted",
      `1, 'completed', 'fp', 't', ${later}, 200, '[["a","b"]]', NULL, NULL`,
    ],
    "future_version": [
      "version, state, fingerprint, token, lease_until, expires_at",
      `99, 'in_flight', 'fp', 't', ${before}, ${later}`,
    ],
    "no_deadline": [
      "version, state, fingerprint, token, lease_until, expires_at",
      `1, 'in_flight', 'fp', 't', ${before}, NULL`,
    ],
    "bad_headers": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, 200, '[["a",1]]', x'00'`,
    ],
    "null_status": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, NULL, '[]', x'00'`,
    ],
  };
  const [columns, values] = rows[kind];
  await pool.execute(
    `INSERT INTO \`${table}\` (slot, created_at, ${columns})
     VALUES (?, UTC_TIMESTAMP(6), ${values})`,
    [slot],
  );
}
