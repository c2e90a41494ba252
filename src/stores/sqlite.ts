// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode SqliteStore}: idempotency records in an SQLite file, through
 * `node:sqlite` (Deno 2.9, Node ≥ 22.5), beside the application's own data.
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import { assertSlot, claimOptions, durationMs, StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  IdempotencyStore,
  PeekResult,
  StoredResponse,
  StoreStats,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse, encodeHeaders } from "../_record.ts";
import { knownOptions, nonNegativeInteger } from "../_validate.ts";
import { decodeClaim, decodePeek } from "./_postgres_sql.ts";
import { Orphans } from "./_orphans.ts";
import { type Operation, type StoreCall, StoreCalls } from "./_store_call.ts";
import {
  asRow,
  DEFAULT_TABLE,
  quoteTable,
  sqliteMigration,
  type SqliteStatements,
  sqliteStatements,
} from "./_sqlite_sql.ts";
import {
  plain,
  SqliteUnit,
  type TransactionalHandler,
  type TransactionSetup,
  WriteTurn,
} from "./_sqlite_transaction.ts";

export * from "./_contract.ts";
export type { UnitOfWork } from "../store.ts";
export { DEFAULT_TABLE, sqliteMigration } from "./_sqlite_sql.ts";
export type { TransactionalHandler } from "./_sqlite_transaction.ts";

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
const CLAIM_ATTEMPTS = 4;
type Statement = keyof SqliteStatements;

/**
 * An {@linkcode IdempotencyStore} in an SQLite table, one row per slot, on
 * `node:sqlite`'s `DatabaseSync`: every operation one statement on the
 * database's clock (`unixepoch('subsec')`), in WAL mode so that readers never
 * wait. A claim reads first: a replay or a conflict is that one `SELECT`,
 * taking no write lock; a new key or a takeover adds one
 * insert-or-take-over-when-free upsert with `RETURNING`, which SQLite's one
 * writer judges alone. Processes sharing the file share the store.
 *
 * `DatabaseSync` blocks the event loop for each statement (a few
 * microseconds to read, tens for a write, a disk flush under
 * `synchronous=FULL`: bench/README.md), and for up to `busyTimeoutMs` while
 * another process holds the write lock. A {@linkcode SqliteStore.transactional}
 * handler holds that lock for its whole length: other processes' writes
 * (claims of new keys, completions, renewals) stop their event loops for up
 * to `busyTimeoutMs` and then fail with 503, and this process's writes wait
 * (without blocking) for up to `timeoutMs`. Keep such handlers to a few
 * milliseconds, well under the lease, and write to the database only through
 * the connection they are given while they run.
 *
 * @example Guard a handler with records in an SQLite file
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { SqliteStore } from "@idempotent/http/sqlite";
 * import { accountOf } from "./auth.ts"; // request => the stable account id
 *
 * const store = new SqliteStore({ database: "app.db" });
 * store.migrate();
 * setInterval(() => store.sweep(), 60_000);
 * const handler = () => Response.json({ id: 1 }, { status: 201 });
 * Deno.serve(idempotency(handler, { store, scope: accountOf }));
 * ```
 */
export class SqliteStore implements IdempotencyStore {
  #db: DatabaseSync;
  #owned: boolean;
  #file: string;
  #busyTimeoutMs: number;
  #table: string;
  #name: string;
  #text: SqliteStatements;
  #prepared = new Map<Statement, StatementSync>();
  #calls: StoreCalls;
  #turn = new WriteTurn();
  #txDb: DatabaseSync | undefined;
  #txComplete: StatementSync | undefined;
  #setup: TransactionSetup;
  #units = new WeakMap<Request, SqliteUnit>();

  /**
   * Makes a store on a database; opens the file when given a path. Run
   * {@linkcode SqliteStore.migrate} (or {@linkcode sqliteMigration}'s SQL)
   * once before use.
   *
   * @throws {TypeError} When `database` is neither a `DatabaseSync` nor a
   * path of a file, `table` is invalid, or an option is unknown.
   * @throws {RangeError} When `timeoutMs` or `busyTimeoutMs` is.
   */
  constructor(options: SqliteStoreOptions) {
    knownOptions("SqliteStore", options ?? {}, OPTIONS);
    const { database, busyTimeoutMs = 1000, timeoutMs = 2000 } = options;
    nonNegativeInteger("busyTimeoutMs", busyTimeoutMs, "milliseconds");
    if (typeof timeoutMs !== "number" || !(timeoutMs > 0)) {
      throw new RangeError(
        `'timeoutMs' must be a positive number of milliseconds: current value is ${timeoutMs}`,
      );
    }
    this.#name = options.table ?? DEFAULT_TABLE;
    this.#table = quoteTable(this.#name);
    this.#busyTimeoutMs = busyTimeoutMs;
    if (
      typeof database === "string" && database !== "" && database !== ":memory:"
    ) {
      this.#db = this.#open(database);
      this.#owned = true;
    } else if (database instanceof DatabaseSync) {
      this.#db = database;
      this.#owned = false;
    } else {
      throw new TypeError(
        `'database' must be a node:sqlite DatabaseSync or the path of a file: current value is ${
          typeof database === "string" ? JSON.stringify(database) : database
        }`,
      );
    }
    const file = this.#db.prepare("PRAGMA database_list").all()
      .find((row) => row.name === "main")?.file;
    this.#file = typeof file === "string" ? file : "";
    this.#text = sqliteStatements(this.#table);
    const failed = (operation: Operation, cause: unknown) =>
      failure(operation, cause, this.#name);
    // Nothing can land late: a statement runs whole, synchronously, or not.
    const orphans = new Orphans((slot, token) => this.release(slot, token));
    this.#calls = new StoreCalls(timeoutMs, orphans, {
      failed,
      timedOut: (operation) =>
        failed(
          operation,
          new Error(
            `No write turn within ${timeoutMs} ms: this process's transaction held it`,
          ),
        ),
    });
    this.#setup = {
      turn: this.#turn,
      connection: () => this.#txDb ??= this.#open(this.#fileOrThrow()),
      complete: (db) => this.#txComplete ??= db.prepare(this.#text.complete),
    };
  }

  /** The table, quoted as it appears in the store's SQL. */
  get table(): string {
    return this.#table;
  }

  /**
   * Creates the table and its index ({@linkcode sqliteMigration}) if absent,
   * in one `BEGIN IMMEDIATE` transaction; puts the file in WAL mode; gives
   * the connection a `busy_timeout` when it has none. Safe to run from
   * several processes at once.
   *
   * @throws {Error} When the file cannot be put in WAL mode (an in-memory
   * database), or the database refuses (read-only).
   */
  async migrate(): Promise<void> {
    await this.#turn.take();
    try {
      this.#migrate(this.#db);
    } finally {
      this.#turn.give();
    }
  }

  #migrate(db: DatabaseSync): void {
    const busy = db.prepare("PRAGMA busy_timeout").get()?.timeout;
    if (busy === 0) db.exec(`PRAGMA busy_timeout = ${this.#busyTimeoutMs}`);
    const mode = db.prepare("PRAGMA journal_mode = WAL").get()?.journal_mode;
    if (mode !== "wal") {
      throw new Error(
        `SqliteStore needs a database file in WAL mode: journal_mode is ${
          JSON.stringify(mode)
        } (an in-memory database cannot be one)`,
      );
    }
    // Nothing to create: no write, so a read-only connection passes too.
    const names = [this.#name, `${this.#name}_expires_at_idx`];
    const found = db.prepare(
      "SELECT count(*) AS n FROM sqlite_schema WHERE name IN (?, ?)",
    ).get(...names)?.n;
    if (found === 2) return;
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(sqliteMigration(this.#name));
      db.exec("COMMIT");
    } finally {
      if (db.isTransaction) db.exec("ROLLBACK");
    }
  }

  /**
   * Deletes expired rows, `batchSize` per statement until a batch deletes
   * fewer, and returns how many. Expired rows never block, so sweeping only
   * reclaims space. Each batch is one write: it waits for this process's
   * transaction, and holds the write lock for its length.
   *
   * @throws {RangeError} When `batchSize` is not a positive integer.
   * @throws {StoreError} When a batch fails.
   */
  async sweep(options: SqliteSweepOptions = {}): Promise<number> {
    const batchSize = options.batchSize ?? 1000;
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new RangeError(
        `'batchSize' must be a positive integer: current value is ${batchSize}`,
      );
    }
    let total = 0;
    while (true) {
      const count = await this.#write("forget", "sweep", [batchSize]);
      total += count;
      if (count < batchSize) return total;
    }
  }

  /** {@linkcode IdempotencyStore.claim}: one `SELECT`, and one upsert when the slot is free. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    const token = crypto.randomUUID();
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const row = asRow(await this.#read("claim", "read", [slot]));
      if (row !== undefined && row.free !== true) {
        return decodeClaim(row, token);
      }
      const params = [slot, fingerprint, token, leaseMs, ttlMs];
      const taken = await this.#calls.run(
        "claim",
        (call) => this.#turned(call, () => this.#get("take", params)),
      );
      if (taken !== undefined) return decodeClaim(taken, token);
    }
    return { state: "in_flight", fingerprint: null, retryAfterMs: 1 };
  }

  /** {@linkcode IdempotencyStore.complete} in one fenced `UPDATE`. */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    return await this.#fenced("complete", [
      slot,
      String(token),
      response.status,
      encodeHeaders(response.headers),
      response.body,
      response.body === null ? response.omitted! : null,
    ]);
  }

  /** {@linkcode IdempotencyStore.release} in one fenced `DELETE`. */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    return await this.#fenced("release", [slot, String(token)]);
  }

  /** {@linkcode IdempotencyStore.extend} from the database's now, fenced. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    leaseMs = durationMs("leaseMs", leaseMs);
    return await this.#fenced("extend", [slot, String(token), leaseMs]);
  }

  /**
   * The connection holding the request's `BEGIN IMMEDIATE` transaction,
   * opened on first call (later calls get the same one): what the handler
   * writes on it commits with the record or not at all. It is a connection
   * of the store's own, to the same file, so that nothing else of the
   * process joins the transaction. Pass the request the guarded handler
   * received; a throw, an uncacheable response or a lost claim (409) rolls
   * back.
   *
   * @throws {TypeError} When the request is not one this store's middleware
   * claimed (unguarded, without a key, a replay, or guarded through another
   * store).
   *
   * @example Write an order in the request's transaction
   * ```ts ignore
   * const db = await store.transaction(request);
   * db.prepare("INSERT INTO orders (item) VALUES (?)").run("book");
   * ```
   */
  async transaction(request: Request): Promise<DatabaseSync> {
    const unit = this.#units.get(request);
    if (unit === undefined) {
      throw new TypeError(
        "No transaction for this request: only a request this SqliteStore's middleware claimed has one (pass the request the handler received; a FailoverStore does not open one)",
      );
    }
    return await unit.open();
  }

  /**
   * Wraps a handler so that it receives, as its second argument, the
   * connection of the request's transaction ({@linkcode SqliteStore.transaction}).
   * A request no store claimed (without a key, or a method not guarded) gets
   * a plain transaction of its own: committed when the handler returns,
   * rolled back when it throws.
   *
   * @throws {TypeError} When `handler` is not a function.
   *
   * @example An order and its record in one transaction
   * ```ts ignore
   * Deno.serve(idempotency(store.transactional((req, db) => {
   *   const order = db.prepare("INSERT INTO orders (item) VALUES (?) RETURNING id").get("book");
   *   return Response.json(order, { status: 201 });
   * }), { store, scope: accountOf }));
   * ```
   */
  transactional<A extends unknown[]>(
    handler: TransactionalHandler<A>,
  ): (request: Request, ...args: A) => Promise<Response> {
    if (typeof handler !== "function") {
      throw new TypeError(
        `'handler' must be a function: current value is ${handler}`,
      );
    }
    return async (request, ...args) => {
      const unit = this.#units.get(request);
      if (unit === undefined) {
        return await plain(this.#setup, handler, request, args);
      }
      return await handler(request, await unit.open(), ...args);
    };
  }

  /**
   * {@linkcode IdempotencyStore.unitOfWork}: remembers the claimed request
   * for {@linkcode SqliteStore.transaction}.
   */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new SqliteUnit(this.#setup, slot, token);
    this.#units.set(request, unit);
    return unit;
  }

  /** {@linkcode IdempotencyStore.peek}: one `SELECT` (the body's length, not the body). */
  async peek(slot: string): Promise<PeekResult> {
    assertSlot(slot);
    return decodePeek(asRow(await this.#read("peek", "peek", [slot])));
  }

  /** {@linkcode IdempotencyStore.forget}: `DELETE`s the slot's row. */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    const row = await this.#calls.run(
      "forget",
      (call) => this.#turned(call, () => this.#get("forget", [slot])),
    );
    return row?.live === 1 ? "deleted" : "absent";
  }

  /** {@linkcode IdempotencyStore.stats}: one exact count of the live rows, a scan of the table. */
  async stats(_options?: { limit?: number }): Promise<StoreStats> {
    const row = await this.#read("stats", "stats", []) ?? {};
    const [inFlight, completed, total] = [
      row.in_flight,
      row.completed,
      row.total,
    ]
      .map((n) => Number(n) || 0) as [number, number, number];
    const unreadable = total - inFlight - completed;
    return { inFlight, completed, unreadable, exact: true };
  }

  /**
   * Closes the connections the store opened: the transactions' one, and
   * the database when it was given a path. An application's own
   * `DatabaseSync` stays open.
   */
  close(): void {
    if (this.#txDb?.isOpen) this.#txDb.close();
    if (this.#owned && this.#db.isOpen) this.#db.close();
  }

  #open(path: string): DatabaseSync {
    const db = new DatabaseSync(path, { timeout: this.#busyTimeoutMs });
    return db;
  }

  #fileOrThrow(): string {
    if (this.#file === "") {
      throw new TypeError(
        "SqliteStore.transactional() needs a database file: this database is in memory",
      );
    }
    return this.#file;
  }

  #statement(name: Statement): StatementSync {
    let statement = this.#prepared.get(name);
    if (statement === undefined) {
      statement = this.#db.prepare(this.#text[name]);
      this.#prepared.set(name, statement);
    }
    return statement;
  }

  #get(
    name: Statement,
    params: Parameter[],
  ): Record<string, unknown> | undefined {
    return this.#statement(name).get(...params) as
      | Record<string, unknown>
      | undefined;
  }

  #read(
    operation: Operation,
    name: Statement,
    params: Parameter[],
  ): Promise<Record<string, unknown> | undefined> {
    return this.#calls.run(
      operation,
      () => Promise.resolve(this.#get(name, params)),
    );
  }

  /** Runs `work` now if no transaction of this process holds the write lock, else in its turn. */
  #turned<T>(call: StoreCall, work: () => T): Promise<T> {
    if (this.#turn.free) return Promise.resolve(work());
    return this.#turn.take().then(() => {
      try {
        call.throwIfExpired();
        return work();
      } finally {
        this.#turn.give();
      }
    });
  }

  #write(
    operation: Operation,
    name: Statement,
    params: Parameter[],
  ): Promise<number> {
    return this.#calls.run(
      operation,
      (call) =>
        this.#turned(
          call,
          () => Number(this.#statement(name).run(...params).changes),
        ),
    );
  }

  async #fenced(
    operation: "complete" | "release" | "extend",
    params: Parameter[],
  ): Promise<WriteOutcome> {
    return await this.#write(operation, operation, params) === 1
      ? "applied"
      : "lost";
  }
}

type Parameter = string | number | Uint8Array | null;

/** A failed call's error, with what to do when the table is missing. */
function failure(
  operation: Operation,
  cause: unknown,
  table: string,
): StoreError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const missing = /no such table/.test(reason)
    ? `: run \`store.migrate()\` (or sqliteMigration()'s SQL) on ${
      JSON.stringify(table)
    } before serving`
    : "";
  return new StoreError(
    `SQLite ${operation} failed: ${reason}${missing}`,
    { operation, cause },
  );
}
