// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's table: its name, checked and quoted, and the migration
 * that creates it.
 *
 * @module
 */

import type { PostgresSql } from "./_postgres_sql.ts";

/** The table name when none is given. */
export const DEFAULT_TABLE = "idempotency_keys";

const MAX_TABLE_BYTES = 48;
const MAX_SCHEMA_BYTES = 63;

/**
 * Validates a table name and returns its quoted parts.
 *
 * @param name The table, optionally `schema.table`.
 * @returns The quoted name, the bare table part and the schema, if any.
 * @throws {TypeError} When the name is invalid.
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

/**
 * Runs the migration of `table` on `sql`. No parameters: postgres.js sends
 * one simple-protocol query, which the server runs as one implicit
 * transaction, so the advisory lock is held until both CREATEs commit.
 *
 * @param sql The postgres.js instance.
 * @param table The table, optionally `schema.table`.
 */
export async function migrate(sql: PostgresSql, table: string): Promise<void> {
  const text = postgresMigration(table);
  try {
    await sql.unsafe(text);
  } catch (error) {
    // A catalog race the lock did not cover (say, a migration run by other
    // means) leaves the objects in place.
    const code = (error as { code?: unknown } | null)?.code;
    // unique_violation on the catalog, duplicate_table, duplicate_object
    if (code !== "23505" && code !== "42P07" && code !== "42710") throw error;
    await sql.unsafe(text);
  }
}
