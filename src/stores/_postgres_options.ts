// Copyright 2026 the @idempotent/http authors. MIT license.
/** PostgresStore's options and their checks. @module */

import type { StoreEvent } from "../store.ts";
import {
  knownOptions,
  nonNegativeInteger,
  optionalFunction,
} from "../_validate.ts";
import type { PostgresSql } from "./_postgres_sql.ts";
import { DEFAULT_TABLE, parseTable } from "./_postgres_migration.ts";
import type { TransactionSetup } from "./_postgres_transaction.ts";
import { timeoutOption } from "./_store_call.ts";

/** The isolation level of a request's transaction. */
export type PostgresIsolation =
  | "read committed"
  | "repeatable read"
  | "serializable";

/** How {@linkcode PostgresStore.transaction} opens a request's transaction. */
export interface PostgresTransactionOptions {
  /**
   * The isolation level. Under `repeatable read` and `serializable`, a lease
   * renewal committed while the transaction is open (from a third of the
   * lease on) fails the record's write with a serialization failure (503,
   * the retry runs once): keep such handlers well under a third of the lease.
   *
   * @default {"read committed"}
   */
  isolation?: PostgresIsolation;
  /**
   * `SET LOCAL statement_timeout` for every statement of the transaction, in
   * milliseconds (`0` keeps the server's): it bounds how long a handler
   * stuck on a lock keeps its claim renewed.
   *
   * @default {10000}
   */
  statementTimeoutMs?: number;
}

/** Options of the {@linkcode PostgresStore} constructor. */
export interface PostgresStoreOptions {
  /**
   * A postgres.js instance, `postgres(url)`; the store never ends it. After
   * lost connections postgres.js 3.4.9 may take 30 s or more to reconnect
   * (503s meanwhile, nothing runs twice); to recover in about a second, use
   * `postgres(url, { connect_timeout: 1, backoff: () => 0.1 })`.
   */
  sql: PostgresSql;
  /**
   * The table, optionally `schema.table`: each part is quoted as written, the
   * table part at most 48 bytes. {@linkcode PostgresStore.migrate} creates a
   * missing schema.
   *
   * @default {"idempotency_keys"}
   */
  table?: string;
  /**
   * How long one operation may take, waiting for a pooled connection
   * included: a positive integer of milliseconds, or `Infinity` for none (docs/architecture.md, "Store calls and deadlines").
   * The statement is never cancelled; for the server to stop waiting too,
   * give the client `connection: { lock_timeout: 2000 }` or
   * `statement_timeout`.
   *
   * @default {2000}
   */
  timeoutMs?: number;
  /**
   * How a handler's transaction is opened.
   *
   * @default {{ isolation: "read committed", statementTimeoutMs: 10000 }}
   */
  transaction?: PostgresTransactionOptions;
  /**
   * Receives each {@linkcode StoreEvent}: the end of each undo of a claim
   * that failed but may have committed; a throw is ignored.
   * @default {undefined}
   */
  onEvent?: (event: StoreEvent) => void;
}

/** Options of {@linkcode PostgresStore.sweep}. */
export interface PostgresSweepOptions {
  /**
   * How many expired rows one `DELETE` removes.
   *
   * @default {1000}
   */
  batchSize?: number;
}

/** The checked options: `name` the table as given, `table` as quoted. */
export interface PostgresSettings extends Omit<TransactionSetup, "complete"> {
  name: string;
  table: string;
  timeoutMs: number;
  onEvent: ((event: StoreEvent) => void) | undefined;
}

/** Checks a PostgresStore's options and fills in the defaults. */
export function postgresSettings(
  options: PostgresStoreOptions,
): PostgresSettings {
  if (typeof options?.sql?.unsafe !== "function") {
    throw new TypeError(
      "'sql' must be a postgres.js instance: current value has no unsafe()",
    );
  }
  knownOptions("PostgresStore", options, POSTGRES_OPTIONS);
  const name = options.table ?? DEFAULT_TABLE;
  const timeoutMs = timeoutOption(options.timeoutMs, 2000);
  const table = parseTable(name).quoted;
  const transaction = options.transaction ?? {};
  knownOptions("PostgresStore 'transaction'", transaction, TRANSACTION_OPTIONS);
  const { isolation = "read committed", statementTimeoutMs = 10_000 } =
    transaction;
  if (
    !["read committed", "repeatable read", "serializable"].includes(isolation)
  ) {
    throw new TypeError(
      `'transaction.isolation' must be "read committed", "repeatable read" or "serializable": current value is ${
        JSON.stringify(isolation)
      }`,
    );
  }
  const timeout = "transaction.statementTimeoutMs";
  nonNegativeInteger(timeout, statementTimeoutMs, "milliseconds");
  const { sql } = options;
  const begin = `isolation level ${isolation}`;
  const onEvent = optionalFunction("onEvent", options.onEvent);
  return { sql, name, table, timeoutMs, begin, statementTimeoutMs, onEvent };
}

const POSTGRES_OPTIONS = [
  "sql",
  "table",
  "timeoutMs",
  "transaction",
  "onEvent",
];
const TRANSACTION_OPTIONS = ["isolation", "statementTimeoutMs"];
