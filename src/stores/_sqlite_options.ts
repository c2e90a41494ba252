// Copyright 2026 the @idempotent/http authors. MIT license.
/** SqliteStore's options, their checks, its migration and its errors. @module */

import { DatabaseSync } from "node:sqlite";
import { StoreError } from "../store.ts";
import { knownOptions, nonNegativeMs } from "../_validate.ts";
import { type Operation, timeoutOption } from "./_store_call.ts";
import { DEFAULT_TABLE, quoteTable, sqliteMigration } from "./_sqlite_sql.ts";
import { rollback } from "./_sqlite_transaction.ts";

/** Options of the {@linkcode SqliteStore} constructor. */
export interface SqliteStoreOptions {
  /**
   * A `node:sqlite` `DatabaseSync` the application opened (the store never
   * closes it), or the path of a file the store opens and
   * {@linkcode SqliteStore.close} closes. Not `:memory:`: transactions and
   * other processes need a file.
   */
  database: DatabaseSync | string;
  /**
   * The table, quoted as written, at most 48 characters.
   *
   * @default {"idempotency_keys"}
   */
  table?: string;
  /**
   * How long a statement waits for another process's write lock
   * (`PRAGMA busy_timeout`), in milliseconds, the event loop stopped
   * meanwhile. Set on connections the store opens, and by
   * {@linkcode SqliteStore.migrate} on an application's connection that
   * has none; one that has its own keeps it.
   *
   * @default {1000}
   */
  busyTimeoutMs?: number;
  /**
   * How long one operation may wait for this process's open transaction
   * before it fails with a {@linkcode StoreError} (503), in milliseconds.
   *
   * @default {2000}
   */
  timeoutMs?: number;
}

/** Options of {@linkcode SqliteStore.sweep}. */
export interface SqliteSweepOptions {
  /**
   * How many expired rows one `DELETE` removes.
   *
   * @default {1000}
   */
  batchSize?: number;
}

const OPTIONS = ["database", "table", "busyTimeoutMs", "timeoutMs"];

/** The checked options: the connection, whether the store opened it, its file (`""`: in memory). */
export type SqliteSettings = Required<Omit<SqliteStoreOptions, "database">> & {
  db: DatabaseSync;
  owned: boolean;
  file: string;
};

/** Checks a SqliteStore's options, fills in the defaults, opens a path. */
export function sqliteSettings(options: SqliteStoreOptions): SqliteSettings {
  knownOptions("SqliteStore", options ?? {}, OPTIONS);
  const { database, busyTimeoutMs = 1000 } = options;
  nonNegativeMs("busyTimeoutMs", busyTimeoutMs);
  const timeoutMs = timeoutOption(options.timeoutMs, 2000);
  const table = options.table ?? DEFAULT_TABLE;
  quoteTable(table);
  let db: DatabaseSync;
  const path = typeof database === "string" && database !== "" &&
    database !== ":memory:";
  if (path) db = openFile(database as string, busyTimeoutMs);
  else if (database instanceof DatabaseSync) db = database;
  else {
    throw new TypeError(
      `'database' must be a node:sqlite DatabaseSync or the path of a file: current value is ${
        typeof database === "string" ? JSON.stringify(database) : database
      }`,
    );
  }
  const file = db.prepare("PRAGMA database_list").all()
    .find((row) => row.name === "main")?.file;
  const owned = path;
  return {
    db,
    owned,
    file: String(file ?? ""),
    table,
    busyTimeoutMs,
    timeoutMs,
  };
}

/** Opens a connection of the store's own, waiting `busyTimeoutMs` for locks. */
export function openFile(path: string, busyTimeoutMs: number): DatabaseSync {
  if (path === "") {
    throw new TypeError(
      "SqliteStore.transactional() needs a database file: this database is in memory",
    );
  }
  const db = new DatabaseSync(path); // its `timeout` option is Node 22.16+
  db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  return db;
}

/** {@linkcode SqliteStore.migrate} on `db`: WAL, a busy_timeout if none, the table if absent. */
export function migrateOn(
  db: DatabaseSync,
  name: string,
  busyTimeoutMs: number,
): void {
  const busy = db.prepare("PRAGMA busy_timeout").get()?.timeout;
  if (busy === 0) db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  const mode = db.prepare("PRAGMA journal_mode = WAL").get()?.journal_mode;
  if (mode !== "wal") {
    throw new Error(
      `SqliteStore needs a database file in WAL mode: journal_mode is ${
        JSON.stringify(mode)
      } (an in-memory database cannot be one)`,
    );
  }
  // Nothing to create: no write, so a read-only connection passes too.
  const names = [name, `${name}_expires_at_idx`];
  const found = db.prepare(
    "SELECT count(*) AS n FROM sqlite_schema WHERE name IN (?, ?)",
  ).get(...names)?.n;
  if (found === 2) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    db.exec(`${sqliteMigration(name)}COMMIT;`);
  } catch (error) {
    rollback(db);
    throw error;
  }
}

/** A failed call's error, with what to do when the table is missing. */
export function failure(
  operation: Operation,
  cause: unknown,
  table: string,
): StoreError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const missing = /no such table/.test(reason)
    ? `: run \`store.migrate()\` on ${JSON.stringify(table)} before serving`
    : "";
  const message = `SQLite ${operation} failed: ${reason}${missing}`;
  return new StoreError(message, { operation, cause });
}
