// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's protocol: table names and their quoting, the migration,
 * the statement of each operation, and the reading of a claim's row. No
 * transport here: `postgres.ts` runs these through postgres.js.
 *
 * @module
 */

import type { ClaimResult } from "../store.ts";
import {
  byteView,
  decodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";

/** A row as postgres.js returns it. */
export type PostgresRow = Record<string, unknown>;

/** The table name when none is given. */
export const DEFAULT_TABLE = "idempotency_keys";

const MAX_TABLE_BYTES = 48;
const MAX_SCHEMA_BYTES = 63;

/** The time of the statement, on the database's clock (stable within it). */
const NOW = "statement_timestamp()";

/**
 * Validates a table name and returns its quoted parts.
 *
 * @param name The table, optionally `schema.table`.
 * @returns The quoted name and the bare table part.
 */
export function parseTable(
  name: string,
): { quoted: string; table: string; schema: string | null } {
  if (typeof name !== "string") {
    throw new TypeError(
      `'table' must be a string: current value is ${String(name)}`,
    );
  }
  const parts = name.split(".");
  const encoder = new TextEncoder();
  if (
    parts.length > 2 || parts.some((part) => part.length === 0) ||
    name.includes("\0")
  ) {
    throw new TypeError(
      `'table' must be "table" or "schema.table" with non-empty parts and no NUL: current value is ${
        JSON.stringify(name)
      }`,
    );
  }
  const table = parts.at(-1)!;
  if (encoder.encode(table).byteLength > MAX_TABLE_BYTES) {
    throw new TypeError(
      `'table' must name a table of at most ${MAX_TABLE_BYTES} bytes: current value is ${
        JSON.stringify(name)
      }`,
    );
  }
  if (
    parts.length === 2 &&
    encoder.encode(parts[0]!).byteLength > MAX_SCHEMA_BYTES
  ) {
    throw new TypeError(
      `'table' must name a schema of at most ${MAX_SCHEMA_BYTES} bytes: current value is ${
        JSON.stringify(name)
      }`,
    );
  }
  return {
    quoted: parts.map(quoteIdentifier).join("."),
    table,
    schema: parts.length === 2 ? parts[0]! : null,
  };
}

function quoteIdentifier(part: string): string {
  return `"${part.replaceAll('"', '""')}"`;
}

function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * Creates `schema` when it is absent. Not `CREATE SCHEMA IF NOT EXISTS`:
 * PostgreSQL checks the database's CREATE privilege before it looks for the
 * schema, so that statement fails for a role that may use an existing schema
 * but not create one. The DO body is a plain string literal (no dollar
 * quoting a name could close).
 */
function createSchema(schema: string): string {
  const body = `BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ${
    quoteLiteral(schema)
  }) THEN
    CREATE SCHEMA ${quoteIdentifier(schema)};
  END IF;
END`;
  return `DO ${quoteLiteral(body)};\n`;
}

/**
 * The SQL that creates the store's schema (when the table names one), table
 * and index if they are absent: what {@linkcode PostgresStore.migrate} runs,
 * for teams that run their own migrations. The statements take a
 * transaction-scoped advisory lock first, so concurrent runs queue instead
 * of racing, and silence the "already exists, skipping" notices; run them in
 * one transaction (one simple-protocol query, as `psql -c` sends, is one).
 * The schema is created only when it is missing, so a role without the
 * database's CREATE privilege can still migrate into an existing schema.
 *
 * @param table The table, optionally `schema.table`.
 * @returns The statements, separated by semicolons.
 * @throws {TypeError} When the table name is invalid.
 *
 * @example The migration of a schema-qualified table
 * ```ts
 * import { postgresMigration } from "@idempotent/http/postgres";
 * import assert from "node:assert/strict";
 *
 * const text = postgresMigration("app.idempotency_keys");
 * assert.ok(text.includes('CREATE TABLE IF NOT EXISTS "app"."idempotency_keys"'));
 * ```
 */
export function postgresMigration(table: string = DEFAULT_TABLE): string {
  const { quoted, table: bare, schema } = parseTable(table);
  const index = quoteIdentifier(`${bare}_expires_at_idx`);
  return `SET LOCAL client_min_messages = warning;
SELECT pg_advisory_xact_lock(hashtextextended('@idempotent/http migrate', 0));
${
    schema === null
      ? ""
      : createSchema(schema)
  }CREATE TABLE IF NOT EXISTS ${quoted} (
  slot text PRIMARY KEY,
  version smallint NOT NULL,
  state text NOT NULL,
  fingerprint text,
  token text,
  takeovers integer NOT NULL DEFAULT 0,
  lease_until timestamptz,
  expires_at timestamptz,
  status integer,
  headers jsonb,
  body bytea,
  omitted text,
  created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
  completed_at timestamptz
);
CREATE INDEX IF NOT EXISTS ${index} ON ${quoted} (expires_at);
`;
}

/** The statements of one table, built once per store. */
export interface Statements {
  claim: string;
  complete: string;
  release: string;
  extend: string;
  sweep: string;
}

/**
 * Builds the statements of one table.
 *
 * @param t The table, quoted.
 * @returns Its statements.
 */
export function statements(t: string): Statements {
  // A row is free when its TTL ran out (whatever it holds: the sweeper would
  // delete it), or when it is a readable claim of ours whose lease ran out
  // within its TTL. An unreadable row (unknown version, unknown state, no
  // owner, no deadline) is only ever freed by its own expires_at: NULL
  // comparisons make both tests NULL, and CASE takes NULL as false.
  const expired = `(r.expires_at <= ${NOW})`;
  const leaseOver = `(r.version = ${RECORD_VERSION} AND r.state = 'in_flight'
    AND r.token IS NOT NULL AND r.fingerprint IS NOT NULL
    AND r.expires_at > ${NOW} AND r.lease_until <= ${NOW})`;
  const free = `(${expired} OR ${leaseOver})`;
  const fenced = `slot = $1 AND token = $2 AND version = ${RECORD_VERSION}
    AND state = 'in_flight' AND expires_at > ${NOW}`;
  const retryAfter = (alias: string) =>
    `CASE WHEN isfinite(${alias}.lease_until) THEN LEAST(2147483647, GREATEST(1,
    ceil(extract(epoch FROM ${alias}.lease_until - ${NOW}) * 1000)))::int
  END AS retry_after_ms`;
  const columns = (alias: string) =>
    `${alias}.version, ${alias}.state, ${alias}.fingerprint, ${alias}.token,
  ${alias}.takeovers, ${alias}.status, ${alias}.headers::text AS headers,
  ${alias}.body, ${alias}.omitted, (${alias}.expires_at IS NOT NULL) AS has_deadline,
  ${retryAfter(alias)}`;
  return {
    // One statement: read the row; when it is absent or free, insert a fresh
    // claim or take the free row over (ON CONFLICT … DO UPDATE … WHERE free,
    // judged on the latest committed row); return the row written, else the
    // row read. A replay or a conflict reads and writes nothing, so it takes
    // no row lock and flushes no WAL. `free` on a returned row read, and no
    // row at all, mean another claim won between the snapshot and the
    // upsert: the caller runs the statement again (see claim()).
    claim: `WITH cur AS (
  SELECT ${columns("r")}, COALESCE(${free}, false) AS free
  FROM ${t} AS r WHERE r.slot = $1
), ins AS (
  INSERT INTO ${t} AS r
    (slot, version, state, fingerprint, token, takeovers, lease_until, expires_at, created_at)
  SELECT $1, ${RECORD_VERSION}, 'in_flight', $2, $3, 0,
    ${NOW} + $4::float8 * interval '1 millisecond',
    ${NOW} + $5::float8 * interval '1 millisecond', ${NOW}
  WHERE NOT EXISTS (SELECT 1 FROM cur WHERE NOT cur.free)
  ON CONFLICT (slot) DO UPDATE SET
    version = excluded.version, state = excluded.state,
    fingerprint = excluded.fingerprint, token = excluded.token,
    takeovers = CASE WHEN ${expired} THEN 0 ELSE r.takeovers + 1 END,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    status = NULL, headers = NULL, body = NULL, omitted = NULL,
    created_at = CASE WHEN ${expired} THEN ${NOW} ELSE r.created_at END,
    completed_at = NULL
  WHERE ${free}
  RETURNING ${columns("r")}, false AS free
)
SELECT * FROM ins
UNION ALL
SELECT * FROM cur WHERE NOT EXISTS (SELECT 1 FROM ins)`,
    complete: `UPDATE ${t} SET state = 'completed', status = $3::int,
  headers = $4::text::jsonb, body = $5::bytea, omitted = $6::text,
  lease_until = NULL, completed_at = ${NOW}
WHERE ${fenced}`,
    release: `DELETE FROM ${t} WHERE ${fenced}`,
    extend: `UPDATE ${t}
SET lease_until = ${NOW} + $3::float8 * interval '1 millisecond'
WHERE ${fenced}`,
    sweep: `WITH doomed AS (
  SELECT slot FROM ${t} WHERE expires_at <= ${NOW}
  LIMIT $1::int FOR UPDATE SKIP LOCKED
)
DELETE FROM ${t} AS r USING doomed
WHERE r.slot = doomed.slot AND r.expires_at <= ${NOW}`,
  };
}

/**
 * Reads the row a claim returned.
 *
 * @param row The returned row.
 * @param token The token the claim offered.
 * @returns What the claim found.
 */
export function decodeClaim(
  row: PostgresRow | undefined,
  token: string,
): ClaimResult {
  if (row === undefined) return unreadable(1000);
  const retry = typeof row.retry_after_ms === "number"
    ? Math.max(1, row.retry_after_ms)
    : 1000;
  if (row.token === token) {
    return {
      state: "acquired",
      token,
      recovered: typeof row.takeovers === "number" && row.takeovers > 0,
    };
  }
  if (
    row.version !== RECORD_VERSION || typeof row.fingerprint !== "string" ||
    row.has_deadline !== true
  ) return unreadable(retry);
  if (row.state === "in_flight" && typeof row.retry_after_ms === "number") {
    return {
      state: "in_flight",
      fingerprint: row.fingerprint,
      retryAfterMs: retry,
    };
  }
  if (row.state === "completed") {
    const response = toStoredResponse(
      row.status,
      decodeHeaders(row.headers),
      byteView(row.body),
      row.omitted,
    );
    if (response !== null) {
      return { state: "completed", fingerprint: row.fingerprint, response };
    }
  }
  return unreadable(retry);
}
