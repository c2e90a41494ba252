// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the PostgresStore tests share: connections to the PostgreSQL of this
 * machine, a schema (and a migrated store) per test, the claim options and
 * response they write, and rows planted that no PostgresStore wrote.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../src/stores/postgres.ts";
import type { ClaimOptions, StoredResponse } from "../../src/store.ts";
import type { PoisonKind } from "../../src/testing/testing.ts";
import {
  DATABASE_URL,
  integrationTest,
  POSTGRES_IGNORE,
  uniquePrefix,
} from "../_support/services.ts";

/** A postgres.js instance. */
type Sql = ReturnType<typeof postgres>;

/** Why the tests on the real PostgreSQL are skipped, or false when they run. */
export const ignore = POSTGRES_IGNORE;

/** Options that keep the server's notices quiet. */
export const quiet = { onnotice: () => {} };

/** A postgres.js pool on `DATABASE_URL`. */
export function connect(options: Record<string, unknown> = {}): Sql {
  return postgres(DATABASE_URL, { ...quiet, ...options });
}

/** `identifier` as a quoted SQL identifier. */
export function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** A schema for one test, dropped (with everything in it) afterwards. */
export async function withSchema(
  fn: (schema: string, admin: Sql) => Promise<void>,
  name: string = uniquePrefix("pgstore"),
): Promise<void> {
  const admin = connect({ max: 1 });
  try {
    await admin.unsafe(`CREATE SCHEMA ${quote(name)}`);
    try {
      await fn(name, admin);
    } finally {
      await admin.unsafe(`DROP SCHEMA ${quote(name)} CASCADE`);
    }
  } finally {
    await admin.end();
  }
}

/**
 * A migrated PostgresStore on `<schema>.keys` over a pool of its own,
 * ended afterwards.
 */
export async function withStore(
  schema: string,
  pool: Record<string, unknown>,
  fn: (store: PostgresStore, sql: Sql) => Promise<void>,
): Promise<void> {
  const sql = connect(pool);
  try {
    const store = new PostgresStore({ sql, table: `${schema}.keys` });
    await store.migrate();
    await fn(store, sql);
  } finally {
    await sql.end();
  }
}

/** Claim options with `fingerprint` and a 30 s lease, 60 s TTL. */
export const opts = (
  fingerprint: string,
  more: Partial<ClaimOptions> = {},
): ClaimOptions => ({ fingerprint, leaseMs: 30_000, ttlMs: 60_000, ...more });

/** The response the tests complete with. */
export const ok: StoredResponse = {
  status: 201,
  headers: [["content-type", "text/plain"], ["set-cookie", "a=1"], [
    "set-cookie",
    "b=2",
  ]],
  body: new TextEncoder().encode("done"),
};

/** A test that needs the real PostgreSQL. */
export function pgTest(name: string, fn: () => Promise<void>): void {
  integrationTest(name, ignore, fn);
}

/** The kinds of row that no PostgresStore writes. */
type Plant = PoisonKind | "no_deadline" | "bad_headers" | "null_status";

/** Writes a row at `slot` that no PostgresStore wrote. */
export async function plant(
  sql: Sql,
  table: string,
  slot: string,
  kind: Plant,
): Promise<void> {
  const later = "statement_timestamp() + interval '1 hour'";
  const before = "statement_timestamp() - interval '1 second'";
  const rows: Record<Plant, [columns: string, values: string]> = {
    // An unknown state, no owner, headers that are not pairs.
    garbage: [
      "version, state, fingerprint, token, lease_until, expires_at, headers",
      `1, 'x?!', NULL, NULL, ${before}, ${later}, '{"not":"pairs"}'`,
    ],
    // A completed row whose body and omitted disagree (both missing).
    truncated: [
      "version, state, fingerprint, token, expires_at, status, headers, body, omitted",
      `1, 'completed', 'fp', 't', ${later}, 200, '[["a","b"]]', NULL, NULL`,
    ],
    // A later format, its lease already over: still not ours to take.
    "future_version": [
      "version, state, fingerprint, token, lease_until, expires_at",
      `99, 'in_flight', 'fp', 't', ${before}, ${later}`,
    ],
    // A claim of ours with an expired lease but no deadline at all.
    "no_deadline": [
      "version, state, fingerprint, token, lease_until, expires_at",
      `1, 'in_flight', 'fp', 't', ${before}, NULL`,
    ],
    // Headers that are not string pairs.
    "bad_headers": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, 200, '[["a",1]]', '\\x00'`,
    ],
    // No status.
    "null_status": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, NULL, '[]', '\\x00'`,
    ],
  };
  const [columns, values] = rows[kind];
  await sql.unsafe(
    `INSERT INTO ${table} (slot, ${columns}) VALUES ($1, ${values})`,
    [slot],
  );
}
