// Copyright 2026 the @idempotent/http authors. MIT license.
/** PostgresStore's table: its name, checked and quoted, and migration. @module */

import type { PostgresSql } from "./_postgres_sql.ts";

/** The table name when none is given. */
export const DEFAULT_TABLE = "idempotency_keys";

const MAX_TABLE_BYTES = 48;
const MAX_SCHEMA_BYTES = 63;

/** The quoted name, the bare table part and the schema of a valid `table`. */
export function parseTable(
  name: string,
): { quoted: string; table: string; schema: string | null } {
  if (typeof name !== "string") {
    throw new TypeError(
      `'table' must be a string: current value is ${String(name)}`,
    );
  }
  const invalid = (rule: string) =>
    new TypeError(
      `'table' must ${rule}: current value is ${JSON.stringify(name)}`,
    );
  const bytes = (part: string) => new TextEncoder().encode(part).byteLength;
  const parts = name.split(".");
  if (
    parts.length > 2 || parts.some((part) => part.length === 0) ||
    name.includes("\0")
  ) {
    throw invalid(
      'be "table" or "schema.table" with non-empty parts and no NUL',
    );
  }
  const table = parts.at(-1)!;
  if (bytes(table) > MAX_TABLE_BYTES) {
    throw invalid(`name a table of at most ${MAX_TABLE_BYTES} bytes`);
  }
  const schema = parts.length === 2 ? parts[0]! : null;
  if (schema !== null && bytes(schema) > MAX_SCHEMA_BYTES) {
    throw invalid(`name a schema of at most ${MAX_SCHEMA_BYTES} bytes`);
  }
  return { quoted: parts.map(quoteIdentifier).join("."), table, schema };
}

function quoteIdentifier(part: string): string {
  return `"${part.replaceAll('"', '""')}"`;
}

function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * Not `CREATE SCHEMA IF NOT EXISTS`: PostgreSQL checks the database's CREATE
 * privilege before it looks, which fails a role that may only use the
 * schema. A plain literal body: no dollar quote that a name could close.
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
 * The SQL that {@linkcode PostgresStore.migrate} runs, for teams that run
 * their own migrations: it creates the schema (only when missing, so that a
 * role without the database's CREATE privilege can use an existing one), the
 * table and its index, under a transaction-scoped advisory lock so that
 * concurrent runs queue. Run it as one transaction (one simple-protocol
 * query, as `psql -c` sends, is one).
 *
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
 * Runs the migration without parameters: one simple-protocol query, one
 * implicit transaction, so the advisory lock holds until both CREATEs commit.
 */
export async function migrate(sql: PostgresSql, table: string): Promise<void> {
  const text = postgresMigration(table);
  try {
    await sql.unsafe(text);
  } catch (error) {
    // A catalog race the lock did not cover (a migration run by other means):
    // unique_violation on the catalog, duplicate_table, duplicate_object.
    const code = (error as { code?: unknown } | null)?.code;
    if (code !== "23505" && code !== "42P07" && code !== "42710") throw error;
    await sql.unsafe(text);
  }
}
