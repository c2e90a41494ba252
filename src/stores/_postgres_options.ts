// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's options and their checks.
 *
 * @module
 */

import type { PostgresSql } from "./_postgres_sql.ts";
import { DEFAULT_TABLE, parseTable } from "./_postgres_migration.ts";

/** The isolation level of a request's transaction. */
export type PostgresIsolation =
  | "read committed"
  | "repeatable read"
  | "serializable";

/** How {@linkcode PostgresStore.transaction} opens a request's transaction. */
export interface PostgresTransactionOptions {
  /**
   * The isolation level. Under `repeatable read` and `serializable` a lease
   * renewal committed while the transaction is open (the first comes about
   * a third of a lease after the claim) makes the fenced record write fail
   * with a serialization failure: the middleware then rolls back, frees the
   * slot and answers 503, and the retry runs once. Keep such handlers well
   * under a third of the lease, or use a longer lease.
   *
   * @default {"read committed"}
   */
  isolation?: PostgresIsolation;
  /**
   * `SET LOCAL statement_timeout` for every statement of the transaction,
   * the record's write included, in milliseconds; `0` keeps the server's.
   * It bounds how long a handler stuck on a lock keeps its claim renewed.
   *
   * @default {10000}
   */
  statementTimeoutMs?: number;
}

/** Options of the {@linkcode PostgresStore} constructor. */
export interface PostgresStoreOptions {
  /**
   * A postgres.js instance, `postgres(url)`; the store never ends it.
   *
   * After lost connections (a failover, `pg_terminate_backend`), postgres.js
   * 3.4.9 may send nothing until a connect times out (`connect_timeout`, 30 s
   * by default, several times over) and waits up to 20 s before a reconnect.
   * The store still answers within `timeoutMs` (503s, nothing runs twice); to
   * recover in about a second, give the client
   * `postgres(url, { connect_timeout: 1, backoff: () => 0.1 })`.
   */
  sql: PostgresSql;
  /**
   * The table, optionally schema-qualified (`"app.idempotency_keys"`). A dot
   * separates the schema from the table; each part is quoted, so any other
   * character is kept as written. The table part is at most 48 bytes (its
   * index is named after it). {@linkcode PostgresStore.migrate} creates the
   * schema when it is missing.
   *
   * @default {"idempotency_keys"}
   *
   * @example Table names are validated when the store is made
   * ```ts
   * import { PostgresStore } from "@idempotent/http/postgres";
   * import postgres from "postgres";
   * import assert from "node:assert/strict";
   *
   * const sql = postgres("postgres://postgres@127.0.0.1:5432/test"); // connects lazily
   * assert.throws(() => new PostgresStore({ sql, table: "a.b.c" }), TypeError);
   * const store = new PostgresStore({ sql, table: 'app."odd" name' });
   * assert.equal(store.table, '"app"."""odd"" name"');
   * await sql.end();
   * ```
   */
  table?: string;
  /**
   * How long one operation may take, in milliseconds, waiting for a pooled
   * connection included. Past it the operation throws a
   * {@linkcode StoreError} (for a write, the outcome is unknown) and the
   * statement is left to finish on its connection: the store never sends a
   * cancel request, which names a connection rather than a statement and so
   * can hit another request's statement pipelined on it. To make the server
   * stop waiting too (on a lock, say), give the postgres.js client a
   * server-side bound: `postgres(url, { connection: { lock_timeout: 2000 } })`
   * or `statement_timeout`. `Infinity` waits for as long as the driver does.
   *
   * @default {2000}
   */
  timeoutMs?: number;
  /**
   * How a handler's transaction is opened (see
   * {@linkcode PostgresStore.transaction}).
   *
   * @default {{ isolation: "read committed", statementTimeoutMs: 10000 }}
   */
  transaction?: PostgresTransactionOptions;
}

/** Options of {@linkcode PostgresStore.sweep}. */
export interface PostgresSweepOptions {
  /**
   * How many expired rows one `DELETE` removes; the sweep repeats until a
   * batch removes fewer.
   *
   * @default {1000}
   */
  batchSize?: number;
}

/** A {@linkcode PostgresStoreOptions}, checked, with its defaults filled in. */
export interface PostgresSettings {
  sql: PostgresSql;
  /** The table as given. */
  name: string;
  /** The table as the statements quote it. */
  table: string;
  timeoutMs: number;
  /** What a request's transaction needs: `sql`, what follows `BEGIN`, its timeout. */
  transaction: { sql: PostgresSql; begin: string; statementTimeoutMs: number };
}

/**
 * Checks the options of a {@linkcode PostgresStore}.
 *
 * @param options The options.
 * @returns The settings.
 * @throws {TypeError} When `sql`, `table` or `transaction.isolation` is invalid.
 * @throws {RangeError} When `timeoutMs` or `transaction.statementTimeoutMs` is.
 */
export function postgresSettings(
  options: PostgresStoreOptions,
): PostgresSettings {
  if (typeof options?.sql?.unsafe !== "function") {
    throw new TypeError(
      "'sql' must be a postgres.js instance: current value has no unsafe()",
    );
  }
  const name = options.table ?? DEFAULT_TABLE;
  const timeoutMs = options.timeoutMs ?? 2000;
  if (typeof timeoutMs !== "number" || !(timeoutMs > 0)) {
    throw new RangeError(
      `'timeoutMs' must be a positive number: current value is ${timeoutMs}`,
    );
  }
  const table = parseTable(name).quoted;
  const { isolation = "read committed", statementTimeoutMs = 10_000 } =
    options.transaction ?? {};
  if (
    !["read committed", "repeatable read", "serializable"].includes(isolation)
  ) {
    throw new TypeError(
      `'transaction.isolation' must be "read committed", "repeatable read" or "serializable": current value is ${
        JSON.stringify(isolation)
      }`,
    );
  }
  if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs < 0) {
    throw new RangeError(
      `'transaction.statementTimeoutMs' must be a non-negative integer: current value is ${statementTimeoutMs}`,
    );
  }
  return {
    sql: options.sql,
    name,
    table,
    timeoutMs,
    transaction: {
      sql: options.sql,
      begin: `isolation level ${isolation}`,
      statementTimeoutMs,
    },
  };
}
