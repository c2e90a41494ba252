// Copyright 2026 the @idempotent/http authors. MIT license.
/** PostgresStore's SQL: the driver's shape, the statements, their results. @module */

import type { TransactionSql } from "postgres";
import { SEALED_HEADER } from "../_seal.ts";
import type { AdminOperation, StoreOperation } from "../store.ts";
import { RECORD_VERSION } from "../_record.ts";
import type { SqlRow } from "./_sql_rows.ts";

/** A row as postgres.js returns it. */
export type PostgresRow = SqlRow;

/** A statement in flight, as `sql.unsafe()` returns it: its rows, and how many changed. */
export interface PostgresQuery
  extends PromiseLike<PostgresRow[] & { count: number }> {
  /** Never called by the store (docs/architecture.md, "Nothing left behind"). */
  cancel?(): unknown;
}

/**
 * The part of a postgres.js `sql` instance the store uses: a `postgres(url)`
 * result fits, and so does a transaction-free wrapper around one.
 */
export interface PostgresSql {
  /** Runs one statement with `$1`-style parameters. */
  unsafe(
    query: string,
    parameters?: (string | number | boolean | null | Uint8Array)[],
    options?: { prepare?: boolean },
  ): PostgresQuery;
  /** Parsed options: the store follows `prepare`; a transaction needs `max` ≥ 2. */
  options?: { prepare?: boolean; max?: number };
  /**
   * postgres.js's `sql.begin(options, fn)`: `fn` in a transaction on one
   * connection, committed when it resolves. Only
   * {@linkcode PostgresStore.transaction} needs it.
   */
  begin?(
    options: string,
    fn: (tx: TransactionSql) => Promise<unknown>,
  ): Promise<unknown>;
}

/** The database's clock, stable within a statement. */
const NOW = "statement_timestamp()";

/** One table's statements, built once per store. */
export type Statements = Record<
  StoreOperation | AdminOperation | "sweep",
  string
>;

/** The statements of the quoted table `t`. */
export function statements(t: string): Statements {
  // Free: past its TTL (whatever it holds), or a readable claim whose lease
  // ran out within its TTL. An unreadable row (unknown version or state, no
  // owner, no deadline) is freed by its expires_at only: NULL comparisons
  // make both tests NULL, and CASE takes NULL as false.
  const expired = `(r.expires_at <= ${NOW})`;
  const leaseOver = `(r.version = ${RECORD_VERSION} AND r.state = 'in_flight'
    AND r.token IS NOT NULL AND r.fingerprint IS NOT NULL
    AND r.expires_at > ${NOW} AND r.lease_until <= ${NOW})`;
  const free = `(${expired} OR ${leaseOver})`;
  const live = `(expires_at IS NULL OR expires_at > ${NOW})`;
  const readable = `(version = ${RECORD_VERSION} AND fingerprint IS NOT NULL
    AND expires_at IS NOT NULL)`;
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
    // Read the row; when absent or free, insert a claim or take the row over
    // (ON CONFLICT … WHERE free, judged on the latest committed row) and
    // return it, else return the row read: a replay or a conflict writes
    // nothing, so takes no row lock and flushes no WAL. No row, or `free` on
    // a row read, means another claim won after the snapshot: run it again.
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
    // Admin reads: a row past its TTL is absent; one without a deadline is
    // unreadable and stays (docs/architecture.md, Inspect and forget).
    peek: `SELECT version, state, fingerprint, token IS NOT NULL AS has_token,
  status, headers::text AS headers, octet_length(body) AS body_bytes, omitted,
  CASE WHEN $2::int = 1 THEN body END AS body,
  ${epochMs("created_at")} AS claimed_at,
  ${epochMs("LEAST(lease_until, expires_at)")} AS lease_expires_at,
  ${epochMs("expires_at")} AS expires_at
FROM ${t} WHERE slot = $1 AND ${live}`,
    forget: `DELETE FROM ${t} WHERE slot = $1 RETURNING ${live} AS live`,
    stats: `SELECT count(*) FILTER (WHERE ${readable} AND state = 'in_flight'
    AND token IS NOT NULL)::int AS in_flight,
  count(*) FILTER (WHERE ${readable} AND state = 'completed'
    AND status IS NOT NULL)::int AS completed,
  count(*)::int AS total,
  (SELECT COALESCE(jsonb_object_agg(s.key_id, s.n), '{}'::jsonb)::text
    FROM (SELECT split_part(headers->0->>1, ';', 2) AS key_id, count(*) AS n
      FROM ${t} WHERE ${live} AND ${readable} AND state = 'completed'
        AND status IS NOT NULL
        AND CASE WHEN jsonb_typeof(headers) = 'array'
          THEN jsonb_array_length(headers) END = 1
        AND headers->0->>0 = '${SEALED_HEADER}'
      GROUP BY 1) AS s) AS sealed
FROM ${t} WHERE ${live}`,
    sweep: `WITH doomed AS (
  SELECT slot FROM ${t} WHERE expires_at <= ${NOW}
  LIMIT $1::int FOR UPDATE SKIP LOCKED
)
DELETE FROM ${t} AS r USING doomed
WHERE r.slot = doomed.slot AND r.expires_at <= ${NOW}`,
  };
}

/** A timestamp column as epoch milliseconds on the database's clock. */
function epochMs(column: string): string {
  return `(extract(epoch FROM ${column}) * 1000)::float8`;
}

/**
 * Whether a failed statement may have committed: not when the server refused
 * it (severity `ERROR`, such as 57014: a statement rolls back whole) or no
 * connection was opened. Anything else may hide a commit, socket errors
 * included: postgres.js rejects every statement pipelined on a broken socket,
 * committed ones too. A server error is told by its `severity`, not its code
 * (`EPIPE` looks like a SQLSTATE); a `FATAL` one may follow a commit.
 */
export function mayHaveCommitted(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as Record<string, unknown>;
  if (typeof severity === "string" && typeof code === "string") {
    return severity !== "ERROR";
  }
  return ![
    "ECONNREFUSED",
    "ENOTFOUND",
    "EHOSTUNREACH",
    "CONNECT_TIMEOUT",
    "CONNECTION_ENDED",
  ]
    .includes(code as string);
}
