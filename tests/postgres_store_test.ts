// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore against the PostgreSQL of this machine (`DATABASE_URL`):
 * every test works in a schema of its own, dropped afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { postgresMigration, PostgresStore } from "../src/stores/postgres.ts";
import { StoreError } from "../src/store.ts";
import type { ClaimOptions, StoredResponse } from "../src/store.ts";
import { storeConformance } from "./store_conformance.ts";
import type { PoisonKind } from "./store_conformance.ts";
import {
  DATABASE_URL,
  POSTGRES_IGNORE,
  testName,
  uniquePrefix,
} from "./_services.ts";

type Sql = ReturnType<typeof postgres>;

const ignore = POSTGRES_IGNORE;
const quiet = { onnotice: () => {} };

function connect(options: Record<string, unknown> = {}): Sql {
  return postgres(DATABASE_URL, { ...quiet, ...options });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** A schema for one test, dropped (with everything in it) afterwards. */
async function withSchema(
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

const opts = (
  fingerprint: string,
  more: Partial<ClaimOptions> = {},
): ClaimOptions => ({ fingerprint, leaseMs: 30_000, ttlMs: 60_000, ...more });

const ok: StoredResponse = {
  status: 201,
  headers: [["content-type", "text/plain"], ["set-cookie", "a=1"], [
    "set-cookie",
    "b=2",
  ]],
  body: new TextEncoder().encode("done"),
};

function pgTest(name: string, fn: () => Promise<void>): void {
  Deno.test({
    name: testName(name, ignore),
    ignore: ignore !== false,
    sanitizeOps: false,
    sanitizeResources: false,
    fn,
  });
}

// --- the shared suite -------------------------------------------------------

let conformanceSchema = "";
storeConformance({
  name: "PostgresStore",
  ignore,
  leaseMs: 300,
  async setup() {
    const admin = connect({ max: 1 });
    const sql = connect({ max: 10 });
    conformanceSchema = uniquePrefix("pgconf");
    await admin.unsafe(`CREATE SCHEMA ${quote(conformanceSchema)}`);
    const table = `${conformanceSchema}.idempotency_keys`;
    const store = new PostgresStore({ sql, table });
    await store.migrate();
    return {
      store,
      elapse: sleep,
      async poison(slot: string, kind: PoisonKind) {
        await plant(admin, store.table, slot, kind);
      },
      async teardown() {
        await admin.unsafe(`DROP SCHEMA ${quote(conformanceSchema)} CASCADE`);
        await sql.end();
        await admin.end();
      },
    };
  },
});

/** The kinds of row that no PostgresStore writes. */
type Plant = PoisonKind | "no_deadline" | "bad_headers" | "null_status";

/** Writes a row at `slot` that no PostgresStore wrote. */
async function plant(
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
