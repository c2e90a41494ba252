// Copyright 2026 the @idempotent/http authors. MIT license.
/** MysqlStore's SQL: the driver's shape, the table, its statements, their rows. @module */

import { Buffer } from "node:buffer";
import type { PoolConnection } from "mysql2/promise";
import type { ClaimResult, PeekResult, StoredResponse } from "../store.ts";
import { RECORD_VERSION } from "../_record.ts";
import { SEALED_HEADER } from "../_seal.ts";
import { completeParams, decodeClaim, decodePeek } from "./_sql_rows.ts";

/** A value bound to a `?` placeholder. */
export type MysqlParameter = string | number | Buffer | null;

/** A row as mysql2 returns it. */
export type MysqlRow = Record<string, unknown>;

/** What mysql2's promise API resolves to: rows (a `CALL`: result sets) or a header, and the fields. */
export type MysqlResult = [unknown, unknown];

/**
 * The part of a mysql2/promise pool the store uses: a `mysql.createPool(url)`
 * result fits.
 */
export interface MysqlPool {
  /** A prepared statement on any connection. */
  execute(sql: string, values?: MysqlParameter[]): Promise<MysqlResult>;
  /** A text-protocol statement on any connection. */
  query(sql: string, values?: MysqlParameter[]): Promise<MysqlResult>;
  /** A connection of the caller's own: a transaction's, or the migration's. */
  getConnection(): Promise<MysqlConnection>;
  /** mysql2's core pool: the store reads `config.connectionLimit`. */
  pool?: { config?: { connectionLimit?: number } };
}

/** The connection of a request's transaction: mysql2/promise's own. */
export type MysqlConnection = PoolConnection;

/** The table name when none is given. */
export const DEFAULT_TABLE = "idempotency_keys";

/** The session's SQL mode for migrate(), so the claim procedure runs strict. */
export const STRICT_MODE =
  "STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION";

/** Longest table name: the procedure's name adds `_claim_v1` within 64. */
const MAX_TABLE_CHARS = 55;

/** The quoted name and the procedure of a valid `table` (`t` or `db.t`). */
export function parseTable(name: string): { quoted: string; claim: string } {
  const parts = typeof name === "string" ? name.split(".") : [];
  if (
    parts.length === 0 || parts.length > 2 ||
    parts.some((part) => part.length === 0) ||
    /[\0`]/.test(name) || parts.at(-1)!.length > MAX_TABLE_CHARS
  ) {
    throw new TypeError(
      `'table' must be "table" or "database.table" with non-empty parts, no NUL or backtick, the table at most ${MAX_TABLE_CHARS} characters: current value is ${
        typeof name === "string" ? JSON.stringify(name) : String(name)
      }`,
    );
  }
  const quote = (part: string) => `\`${part}\``;
  const claim = [...parts.slice(0, -1), `${parts.at(-1)}_claim_v1`];
  return {
    quoted: parts.map(quote).join("."),
    claim: claim.map(quote).join("."),
  };
}

/** The database's clock, UTC, in microseconds. */
const NOW = "UTC_TIMESTAMP(6)";
/** A duration parameter as an interval, at most 100 years (no overflow). */
const interval = (ms: string) =>
  `INTERVAL LEAST(${ms}, 3153600000000) * 1000 MICROSECOND`;
/** A DATETIME(6) column as epoch milliseconds, on the database's clock. */
const epochMs = (column: string) =>
  `TIMESTAMPDIFF(MICROSECOND, '1970-01-01', ${column}) DIV 1000`;

/** A row's columns as PostgresStore's decoders read them (booleans as 0/1). */
const columns = (now: string) =>
  `version, state, fingerprint, CONVERT(token USING utf8mb4) AS token,
  takeovers, status, headers, body,
  omitted, (expires_at IS NOT NULL) AS has_deadline,
  CAST(LEAST(2147483647, GREATEST(1, CEIL(
    TIMESTAMPDIFF(MICROSECOND, ${now}, lease_until) / 1000))) AS SIGNED)
    AS retry_after_ms`;

/**
 * Free: past its TTL (whatever it holds), or a readable claim whose lease ran
 * out within its TTL. An unreadable row (unknown version or state, no owner,
 * no deadline) is freed by its expires_at only: a NULL makes the test NULL,
 * which IF() and COALESCE(…, 0) take as not free.
 */
const free = (now: string) =>
  `(expires_at <= ${now} OR (version = ${RECORD_VERSION}
    AND state = 'in_flight' AND token IS NOT NULL AND fingerprint IS NOT NULL
    AND expires_at > ${now} AND lease_until <= ${now}))`;

/** The claim's read of the live row: its columns and whether it is free. */
const read = (t: string, slot: string) =>
  `SELECT ${columns(NOW)}, COALESCE(${free(NOW)}, 0) AS free
  FROM ${t} WHERE slot = ${slot}`;

/**
 * The SQL {@linkcode MysqlStore.migrate} runs, for teams that run their own
 * migrations: the table and the claim procedure. The procedure's body runs
 * under the sql_mode it was created with (run these under STRICT_ALL_TABLES),
 * whatever the caller's; arguments bind under the caller's, so parameters
 * are unbounded and the body's INSERT judges lengths. No TEXT column: MariaDB
 * 10.11 stores a routine's over-long value in one modulo 65,536, even strict.
 * The upsert's outcome needs no affected-rows count: `token` is assigned
 * first (the new one only when free), each later column kept unless the row
 * now holds it; `takeovers` and `created_at` read `expires_at` before it
 * changes (left to right; under SIMULTANEOUS_ASSIGNMENT `free` sees the old
 * row, which is as right).
 *
 * @throws {TypeError} When the table name is invalid.
 *
 * @example The migration of a database-qualified table
 * ```ts
 * import { mysqlMigration } from "@idempotent/http/mysql";
 * import assert from "node:assert/strict";
 *
 * const [table, procedure] = mysqlMigration("app.idempotency_keys");
 * assert.ok(table!.startsWith("CREATE TABLE IF NOT EXISTS `app`.`idempotency_keys`"));
 * assert.ok(procedure!.startsWith("CREATE PROCEDURE `app`.`idempotency_keys_claim_v1`"));
 * ```
 */
export function mysqlMigration(table: string = DEFAULT_TABLE): string[] {
  const { quoted: t, claim } = parseTable(table);
  const text = "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin";
  const won = `(token <=> p_token OR ${free("v_now")})`;
  const keep = (column: string, value: string) =>
    `${column} = IF(${won}, ${value}, ${column})`;
  return [
    `CREATE TABLE IF NOT EXISTS ${t} (
  slot VARBINARY(256) NOT NULL PRIMARY KEY,
  version SMALLINT NOT NULL,
  state VARCHAR(32) ${text} NOT NULL,
  fingerprint LONGTEXT ${text},
  token VARBINARY(64),
  takeovers INT NOT NULL DEFAULT 0,
  lease_until DATETIME(6),
  expires_at DATETIME(6),
  status INT,
  headers LONGTEXT ${text},
  body LONGBLOB,
  omitted VARCHAR(32) ${text},
  created_at DATETIME(6) NOT NULL,
  completed_at DATETIME(6),
  KEY expires_at_idx (expires_at)
) ENGINE = InnoDB DEFAULT ${text}`,
    `CREATE PROCEDURE ${claim}(IN p_slot LONGBLOB, IN p_fingerprint LONGTEXT,
  IN p_token LONGBLOB, IN p_lease BIGINT, IN p_ttl BIGINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT ${NOW};
  DECLARE v_busy INT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_busy = 0;
  -- SELECT … INTO is a consistent read; IF (SELECT …) and SET x = (SELECT …)
  -- would be locking reads under REPEATABLE READ.
  SELECT NOT COALESCE(${free("v_now")}, 0) INTO v_busy
  FROM ${t} WHERE slot = p_slot;
  IF NOT v_busy THEN
    INSERT INTO ${t} (slot, version, state, fingerprint, token, takeovers,
      lease_until, expires_at, created_at)
    VALUES (p_slot, ${RECORD_VERSION}, 'in_flight', p_fingerprint, p_token, 0,
      v_now + ${interval("p_lease")}, v_now + ${interval("p_ttl")}, v_now)
    ON DUPLICATE KEY UPDATE
      token = IF(${free("v_now")}, p_token, token),
      ${keep("takeovers", "IF(expires_at <= v_now, 0, takeovers + 1)")},
      ${keep("created_at", "IF(expires_at <= v_now, v_now, created_at)")},
      ${keep("version", String(RECORD_VERSION))},
      ${keep("state", "'in_flight'")},
      ${keep("fingerprint", "p_fingerprint")},
      ${keep("lease_until", `v_now + ${interval("p_lease")}`)},
      ${keep("status", "NULL")}, ${keep("headers", "NULL")},
      ${keep("body", "NULL")}, ${keep("omitted", "NULL")},
      ${keep("completed_at", "NULL")},
      ${keep("expires_at", `v_now + ${interval("p_ttl")}`)};
  END IF;
  ${read(t, "p_slot")};
END`,
  ];
}

/** One table's statements, built once per store. */
export type Statements =
  & Record<"read" | "insert" | "claim" | "complete" | "release", string>
  & Record<"extend" | "peek" | "forget" | "stats", string>
  & { sweep(batchSize: number): string };

/** The statements of `table` (as given). */
export function statements(table: string): Statements {
  const { quoted: t, claim } = parseTable(table);
  const fenced = `slot = ? AND token = ? AND version = ${RECORD_VERSION}
    AND state = 'in_flight' AND expires_at > ${NOW}`;
  const live = `(expires_at IS NULL OR expires_at > ${NOW})`;
  const readable = `(version = ${RECORD_VERSION} AND fingerprint IS NOT NULL
    AND expires_at IS NOT NULL)`;
  const lease = `${NOW} + ${interval("CAST(? AS SIGNED)")}`;
  return {
    // A replay or a conflict is answered by `read` alone: no lock, no CALL;
    // a slot it found absent is claimed by `insert` (a duplicate: by `claim`).
    read: read(t, "?"),
    insert: `INSERT INTO ${t} (slot, version, state, fingerprint, token,
  takeovers, lease_until, expires_at, created_at) VALUES (?, ${RECORD_VERSION},
  'in_flight', ?, ?, 0, ${NOW} + ${interval("?")}, ${NOW} + ${
      interval("?")
    }, ${NOW})`,
    claim: `CALL ${claim}(?, ?, ?, ?, ?)`,
    // The state always changes, so the count is 1 with CLIENT_FOUND_ROWS or without.
    complete: `UPDATE ${t} SET state = 'completed', status = ?, headers = ?,
  body = ?, omitted = ?, lease_until = NULL, completed_at = ${NOW}
WHERE ${fenced}`,
    release: `DELETE FROM ${t} WHERE ${fenced}`,
    // A renewal to the very microsecond it holds would change no row (0
    // without CLIENT_FOUND_ROWS): it then moves 1 µs further, so it always changes.
    extend: `UPDATE ${t} SET lease_until = IF(lease_until = ${lease},
  ${lease} + INTERVAL 1 MICROSECOND, ${lease})
WHERE ${fenced}`,
    // Admin reads: a row past its TTL is absent; one without a deadline is
    // unreadable and stays (docs/architecture.md, Inspect and forget).
    peek: `SELECT version, state, fingerprint, (token IS NOT NULL) AS has_token,
  status, headers, OCTET_LENGTH(body) AS body_bytes, omitted,
  CASE WHEN ? = 1 THEN body END AS body,
  ${epochMs("created_at")} AS claimed_at,
  ${epochMs("LEAST(lease_until, expires_at)")} AS lease_expires_at,
  ${epochMs("expires_at")} AS expires_at
FROM ${t} WHERE slot = ? AND ${live}`,
    forget: `DELETE FROM ${t} WHERE slot = ? AND ${live}`,
    stats: `SELECT
  CAST(COALESCE(SUM(${readable} AND state = 'in_flight' AND token IS NOT NULL), 0) AS SIGNED) AS in_flight,
  CAST(COALESCE(SUM(${readable} AND state = 'completed' AND status IS NOT NULL), 0) AS SIGNED) AS completed,
  COUNT(*) AS total,
  (SELECT COALESCE(JSON_OBJECTAGG(id, n), '{}') FROM (SELECT id, COUNT(*) AS n
    FROM (SELECT CASE WHEN NOT JSON_VALID(headers) THEN NULL WHEN JSON_LENGTH(
      headers) = 1 THEN SUBSTRING_INDEX(SUBSTRING_INDEX(CONCAT(JSON_UNQUOTE(
      JSON_EXTRACT(headers, '$[0][1]')), ';'), ';', 2), ';', -1) END AS id FROM ${t}
      WHERE ${live} AND ${readable} AND state = 'completed' AND status IS NOT NULL
      AND headers LIKE '[["${SEALED_HEADER}",%') AS l
    WHERE id IS NOT NULL GROUP BY id) AS s) AS sealed
FROM ${t} WHERE ${live}`,
    sweep: (batchSize) =>
      `DELETE FROM ${t} WHERE expires_at <= ${NOW} ORDER BY expires_at LIMIT ${batchSize}`,
  };
}

/** The `complete` statement's parameters (as PostgresStore's, fence last). */
export function mysqlCompleteParams(
  slot: string,
  token: string,
  response: StoredResponse,
): MysqlParameter[] {
  const [, , status, headers, body, omitted] = completeParams(
    slot,
    token,
    response,
  );
  const bytes = body instanceof Uint8Array
    ? Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    : null;
  return [
    status,
    headers,
    bytes,
    omitted,
    slot,
    String(token),
  ] as MysqlParameter[];
}

/** The rows of a `CALL`'s first result set, or of a plain `SELECT`. */
export function rowsOf(result: MysqlResult): MysqlRow[] {
  const [first] = result;
  if (!Array.isArray(first)) return [];
  const inner: unknown = first[0];
  return (Array.isArray(inner) ? inner : first) as MysqlRow[];
}

/** The affected-rows count of a statement that returns no rows. */
export const affectedOf = (result: MysqlResult): number =>
  Number((result[0] as { affectedRows?: unknown })?.affectedRows) || 0;

/** Whether a 0/1 column is 1. */
export const truth = (value: unknown): boolean => value === 1 || value === true;

/** Reads the row that a claim offering `token` returned (PostgresStore's reading). */
export function decodeMysqlClaim(
  row: MysqlRow | undefined,
  token: string,
): ClaimResult {
  return decodeClaim(
    row && { ...row, has_deadline: truth(row.has_deadline) },
    token,
  );
}

/** Reads the row of the `peek` statement (PostgresStore's reading). */
export function decodeMysqlPeek(
  row: MysqlRow | undefined,
  withResponse: boolean,
): PeekResult {
  const read = row && { ...row, has_token: truth(row.has_token) };
  return decodePeek(read, withResponse);
}

/** Connection errors after which nothing was sent, so nothing committed. */
const NEVER_SENT =
  /^(ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ER_ACCESS_DENIED_ERROR|ER_BAD_DB_ERROR)$/;

/**
 * Whether a failed statement may have committed. A claim is a `CALL` of
 * several statements, so even a server error (an errno and SQLSTATE) after
 * its upsert may follow a commit; only a connection that was never made
 * sent nothing. An undo is fenced by the token, so a needless one is harmless.
 */
export function mayHaveCommitted(error: unknown): boolean {
  const { code, message } = (error ?? {}) as Record<string, unknown>;
  if (typeof code === "string" && NEVER_SENT.test(code)) return false;
  return !(typeof message === "string" && /Pool is closed/.test(message));
}
