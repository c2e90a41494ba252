// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the SqliteStore tests share: a database file per test in a temporary
 * directory (removed afterwards), the claim options and response they
 * write, and rows planted that no SqliteStore wrote.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import type { ClaimOptions, StoredResponse } from "../../src/store.ts";
import type { PoisonKind } from "../../src/testing/testing.ts";

/** A temporary directory holding `db.sqlite`, removed (with its WAL) on dispose. */
export async function tempDatabase(): Promise<
  { dir: string; path: string } & AsyncDisposable
> {
  const dir = await Deno.makeTempDir({ prefix: "idem-sqlite-" });
  return {
    dir,
    path: `${dir}/db.sqlite`,
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** A migrated SqliteStore on a file of its own, closed and removed on dispose. */
export async function sqliteStore(
  options: { table?: string; busyTimeoutMs?: number; timeoutMs?: number } = {},
): Promise<
  {
    store: SqliteStore;
    path: string;
    dir: string;
    db: DatabaseSync;
  } & AsyncDisposable
> {
  const temp = await tempDatabase();
  const db = new DatabaseSync(temp.path);
  const store = new SqliteStore({ database: db, ...options });
  await store.migrate();
  return {
    store,
    db,
    path: temp.path,
    dir: temp.dir,
    async [Symbol.asyncDispose]() {
      store.close();
      db.close();
      await temp[Symbol.asyncDispose]();
    },
  };
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

/** The kinds of row that no SqliteStore writes. */
export type Plant =
  | PoisonKind
  | "no_deadline"
  | "bad_headers"
  | "null_status"
  | "text_times"
  | "blob_state";

/** Writes a row at `slot` that no SqliteStore wrote. */
export function plant(
  db: DatabaseSync,
  table: string,
  slot: string,
  kind: Plant,
): void {
  const now = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
  const later = `${now} + 3600000`;
  const before = `${now} - 1000`;
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
    "bad_headers": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, 200, '[["a",1]]', x'00'`,
    ],
    "null_status": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, NULL, '[]', x'00'`,
    ],
    // SQLite keeps any type in any column: times that are text.
    "text_times": [
      "version, state, fingerprint, token, lease_until, expires_at",
      `1, 'in_flight', 'fp', 't', 'soon', 'later'`,
    ],
    // A state that is bytes, a body that is text.
    "blob_state": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, x'636f6d706c65746564', 'fp', 't', ${later}, 200, '[]', 'text'`,
    ],
  };
  const [columns, values] = rows[kind];
  db.prepare(
    `INSERT INTO ${table} (slot, created_at, ${columns}) VALUES (?, ${now}, ${values})`,
  ).run(slot);
}
