// Copyright 2026 the @idempotent/http authors. MIT license.
/** SqliteStore's SQL: the table, its statements, and rows as the shared decoders read them. @module */

import { RECORD_VERSION } from "../_record.ts";
import { SEALED_HEADER } from "../_seal.ts";
import type { SqlRow } from "./_sql_rows.ts";

/** The table name when none is given. */
export const DEFAULT_TABLE = "idempotency_keys";

/** The database's clock in whole milliseconds, stable within a statement. */
const NOW = "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)";

/** `name` quoted as an SQLite identifier, once checked. */
export function quoteTable(name: unknown): string {
  if (typeof name !== "string" || !/^[^\0]{1,48}$/.test(name)) {
    throw new TypeError(
      `'table' must be a non-empty string of at most 48 characters without NUL: current value is ${
        typeof name === "string" ? JSON.stringify(name) : String(name)
      }`,
    );
  }
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The SQL that {@linkcode SqliteStore.migrate} runs in one `BEGIN IMMEDIATE`
 * transaction: the table (times are integer milliseconds since the epoch on
 * the database's clock) and the index the sweep uses.
 *
 * @throws {TypeError} When the table name is invalid.
 *
 * @example The migration of the default table
 * ```ts
 * import { sqliteMigration } from "@idempotent/http/sqlite";
 * import assert from "node:assert/strict";
 *
 * assert.ok(sqliteMigration().includes('CREATE TABLE IF NOT EXISTS "idempotency_keys"'));
 * ```
 */
export function sqliteMigration(table: string = DEFAULT_TABLE): string {
  const quoted = quoteTable(table);
  const index = `"${`${table}_expires_at_idx`.replaceAll('"', '""')}"`;
  return `CREATE TABLE IF NOT EXISTS ${quoted} (
  slot TEXT PRIMARY KEY NOT NULL,
  version INTEGER NOT NULL,
  state TEXT NOT NULL,
  fingerprint TEXT,
  token TEXT,
  takeovers INTEGER NOT NULL DEFAULT 0,
  lease_until INTEGER,
  expires_at INTEGER,
  status INTEGER,
  headers TEXT,
  body BLOB,
  omitted TEXT,
  created_at INTEGER NOT NULL,
  completed_at INTEGER
);
CREATE INDEX IF NOT EXISTS ${index} ON ${quoted} (expires_at);
`;
}

/**
 * Whether the row `r` is free, in SQL, as PostgreSQL's (docs/architecture.md,
 * Unreadable is in flight): past its TTL, or a readable claim whose lease
 * ran out within its TTL; a NULL or a value of another type makes it not
 * free. `judged` is the same test in JavaScript.
 */
export function freeRow(): string {
  return `((r.expires_at <= ${NOW}) OR (r.version = ${RECORD_VERSION}
    AND r.state = 'in_flight' AND r.token IS NOT NULL
    AND r.fingerprint IS NOT NULL AND r.lease_until <= ${NOW}
    AND typeof(r.expires_at) IN ('integer', 'real') AND r.expires_at > ${NOW}))`;
}

/**
 * The key id of each live completed row sealed under `encryption` (one
 * header, `idempotent-sealed: <version>;<key id>;…`), as PostgreSQL's
 * `split_part(value, ';', 2)` reads it; JSON that is not valid is skipped,
 * never an error (CASE evaluates only the branch it takes).
 */
function sealedKeyIds(t: string, live: string, readable: string): string {
  const value = `CASE WHEN json_valid(headers) THEN CASE
    WHEN json_type(headers) = 'array' AND json_array_length(headers) = 1
      AND json_extract(headers, '$[0][0]') = '${SEALED_HEADER}'
    THEN json_extract(headers, '$[0][1]') END END`;
  // Between the first ';' and the next (or the end).
  const rest = "substr(v, instr(v, ';') + 1)";
  return `SELECT substr(${rest}, 1, instr(${rest} || ';', ';') - 1) AS key_id
  FROM (SELECT ${value} AS v FROM ${t}
    WHERE ${live} AND ${readable} AND state = 'completed' AND status IS NOT NULL)
  WHERE typeof(v) = 'text' AND instr(v, ';') > 0`;
}

/** Each operation's statement, by name. */
export type SqliteStatements = Record<Core | Admin, string>;
type Core = "read" | "take" | "complete" | "release" | "extend";
type Admin = "peek" | "forget" | "stats" | "sweep";

/** The statements of the quoted table `t`; `?1`… are the parameters. */
export function sqliteStatements(t: string): SqliteStatements {
  const expired = `(r.expires_at <= ${NOW})`;
  const free = freeRow();
  const live = `(expires_at IS NULL OR expires_at > ${NOW})`;
  const readable = `(version = ${RECORD_VERSION}
    AND typeof(fingerprint) = 'text' AND typeof(expires_at) = 'integer')`;
  const fenced = `slot = ?1 AND token = ?2 AND version = ${RECORD_VERSION}
    AND state = 'in_flight' AND expires_at > ${NOW}`;
  return {
    // A claim reads first: a replay or a conflict is this one SELECT, which
    // takes no write lock (WAL readers wait for no writer). The row comes
    // raw, with the database's now: `judged` reads it as `free` does.
    read: `SELECT version, state, fingerprint, token, takeovers, status,
  headers, body, omitted, lease_until, expires_at, ${NOW} AS now
FROM ${t} WHERE slot = ?1`,
    // Absent or free: insert the claim or take the row over, judged under
    // the write lock; no row back means another claim won in between.
    take: `INSERT INTO ${t} AS r
  (slot, version, state, fingerprint, token, takeovers, lease_until, expires_at, created_at)
VALUES (?1, ${RECORD_VERSION}, 'in_flight', ?2, ?3, 0, ${NOW} + ?4, ${NOW} + ?5, ${NOW})
ON CONFLICT (slot) DO UPDATE SET
  version = excluded.version, state = excluded.state,
  fingerprint = excluded.fingerprint, token = excluded.token,
  takeovers = CASE WHEN ${expired} THEN 0 ELSE r.takeovers + 1 END,
  lease_until = excluded.lease_until, expires_at = excluded.expires_at,
  status = NULL, headers = NULL, body = NULL, omitted = NULL,
  created_at = CASE WHEN ${expired} THEN ${NOW} ELSE r.created_at END,
  completed_at = NULL
WHERE ${free}
RETURNING token, takeovers`,
    complete: `UPDATE ${t} SET state = 'completed', status = ?3, headers = ?4,
  body = ?5, omitted = ?6, lease_until = NULL, completed_at = ${NOW}
WHERE ${fenced}`,
    release: `DELETE FROM ${t} WHERE ${fenced}`,
    extend: `UPDATE ${t} SET lease_until = ${NOW} + ?3 WHERE ${fenced}`,
    // Admin reads: a row past its TTL is absent; one without a deadline is
    // unreadable and stays (docs/architecture.md, Inspect and forget).
    peek: `SELECT version, state, fingerprint, token IS NOT NULL AS has_token,
  status, headers, CASE WHEN typeof(body) = 'blob' THEN length(body) END AS body_bytes,
  omitted, CASE WHEN ?2 = 1 THEN body END AS body, created_at AS claimed_at,
  CASE WHEN typeof(lease_until) = 'integer' AND typeof(expires_at) = 'integer'
    THEN min(lease_until, expires_at) END AS lease_expires_at,
  CASE WHEN typeof(expires_at) = 'integer' THEN expires_at END AS expires_at
FROM ${t} WHERE slot = ?1 AND ${live}`,
    forget: `DELETE FROM ${t} WHERE slot = ?1 RETURNING ${live} AS live`,
    stats: `SELECT
  count(*) FILTER (WHERE ${readable} AND state = 'in_flight' AND token IS NOT NULL) AS in_flight,
  count(*) FILTER (WHERE ${readable} AND state = 'completed' AND status IS NOT NULL) AS completed,
  count(*) AS total,
  (SELECT json_group_object(key_id, n) FROM (
    SELECT key_id, count(*) AS n FROM (${sealedKeyIds(t, live, readable)})
    GROUP BY key_id)) AS sealed
FROM ${t} WHERE ${live}`,
    sweep: `DELETE FROM ${t} WHERE rowid IN
  (SELECT rowid FROM ${t} WHERE expires_at <= ${NOW} LIMIT ?1)`,
  };
}

const READ_COLUMNS =
  "version state fingerprint token takeovers status headers body omitted lease_until expires_at now"
    .split(" ");

/**
 * The `read` row (an array: no names to build) judged on its `now` as `take`'s
 * SQL judges `free`, in the shape the shared `decodeClaim` reads (no token).
 */
export function judged(
  row: unknown[] | Record<string, unknown> | undefined,
): (SqlRow & { free: boolean }) | undefined {
  if (row === undefined) return undefined;
  // Node before 22.16 has no setReturnArrays(): its rows come named.
  const values = Array.isArray(row) ? row : READ_COLUMNS.map((c) => row[c]);
  const [version, state, fingerprint, token] = values;
  const lease = values[9], expires = values[10], now = values[11] as number;
  const ms = (value: unknown): value is number => typeof value === "number";
  const expired = ms(expires) && expires <= now;
  const leaseOver = version === RECORD_VERSION && state === "in_flight" &&
    token !== null && fingerprint !== null && ms(expires) && expires > now &&
    ms(lease) && lease <= now;
  return {
    version,
    state,
    fingerprint,
    // Left out: a claim's token is compared with the upsert's row only.
    token: undefined,
    takeovers: values[4],
    status: values[5],
    headers: values[6],
    body: values[7],
    omitted: values[8],
    "has_deadline": expires !== null,
    "retry_after_ms": Number.isInteger(lease)
      ? Math.min(2147483647, Math.max(1, (lease as number) - now))
      : null,
    free: expired || leaseOver,
  };
}
