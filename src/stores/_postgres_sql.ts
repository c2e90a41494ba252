// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's SQL: the part of postgres.js it uses, the statement of
 * each operation, the reading of a claim's row and of a driver's error.
 *
 * @module
 */

import type { TransactionSql } from "postgres";
import type { ClaimResult, StoredResponse } from "../store.ts";
import {
  byteView,
  decodeHeaders,
  encodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";

/** A row as postgres.js returns it. */
export type PostgresRow = Record<string, unknown>;

/**
 * A statement in flight, as postgres.js returns it from `sql.unsafe()`: a
 * promise of the rows, with the number of rows affected, that can be
 * cancelled.
 */
export interface PostgresQuery
  extends PromiseLike<PostgresRow[] & { count: number }> {
  /**
   * Asks the server to cancel the statement. Not called by the store (see
   * {@linkcode PostgresStoreOptions.timeoutMs}); kept so that a postgres.js
   * query is still described whole.
   */
  cancel?(): unknown;
}

/**
 * The part of a postgres.js `sql` instance the store uses: a `postgres(url)`
 * result fits, and so does a transaction-free wrapper around one.
 */
export interface PostgresSql {
  /**
   * Runs one statement with `$1`-style parameters.
   *
   * @param query The SQL text.
   * @param parameters The values of `$1`, `$2`, ….
   * @param options Whether to use a named prepared statement.
   * @returns The statement in flight.
   */
  unsafe(
    query: string,
    parameters?: (string | number | boolean | null | Uint8Array)[],
    options?: { prepare?: boolean },
  ): PostgresQuery;
  /**
   * The instance's parsed options; the store follows its `prepare`, and a
   * transaction needs a pool (`max`) of at least two connections.
   */
  options?: { prepare?: boolean; max?: number };
  /**
   * Runs `fn` in a transaction on one connection of the pool: postgres.js's
   * `sql.begin`. Needed only by {@linkcode PostgresStore.transaction}.
   *
   * @param options What follows `BEGIN` (the isolation level).
   * @param fn The transaction's work; it commits when `fn` resolves.
   * @returns What `fn` resolved to, once committed.
   */
  begin?(
    options: string,
    fn: (tx: TransactionSql) => Promise<unknown>,
  ): Promise<unknown>;
}

/** The time of the statement, on the database's clock (stable within it). */
const NOW = "statement_timestamp()";

/** The statements of one table, built once per store. */
export interface Statements {
  claim: string;
  complete: string;
  release: string;
  extend: string;
  sweep: string;
}

/** The statements of the table `t` (quoted). */
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

/** Reads the row that a claim offering `token` returned. */
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

/** The parameters of the `complete` statement of `token`'s `response`. */
export function completeParams(
  slot: string,
  token: string,
  response: StoredResponse,
): (string | number | Uint8Array | null)[] {
  return [
    slot,
    String(token),
    response.status,
    encodeHeaders(response.headers),
    response.body,
    response.body === null ? response.omitted! : null,
  ];
}

/**
 * Whether a statement that failed with `error` may have committed: not when
 * the server refused it (an error response of severity `ERROR`, such as
 * 57014 for a statement it cancelled: a single statement rolls back whole),
 * nor when no connection could be opened to send it; any other failure may
 * hide a commit. That includes a socket error such as `EPIPE` or
 * `ECONNRESET`: postgres.js pipelines statements on a connection and rejects
 * every one in flight with the socket's error, also one that the server
 * had already committed. The error's shape, not its code, tells a server
 * error (postgres.js gives it a `severity`): `EPIPE` has the shape of a
 * SQLSTATE too. A `FATAL` one (the backend was terminated) may have come
 * after the commit.
 */
export function mayHaveCommitted(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as {
    code?: unknown;
    severity?: unknown;
  };
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
