// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode SqliteStore}: idempotency records in an SQLite file, through
 * `node:sqlite` (Deno 2.9, Node ≥ 22.5), beside the application's own data.
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import { assertSlot } from "../store.ts";
import {
  claimOptions,
  durationMs,
  statsOf,
  sweepInBatches,
} from "./_shared.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  IdempotencyStore,
  PeekOptions,
  PeekResult,
  StoredResponse,
  StoreStats,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { isClaimed } from "../_claimed.ts";
import { completeParams, decodeClaim, decodePeek } from "./_sql_rows.ts";
import { Orphans } from "./_orphans.ts";
import { type Operation, StoreCalls } from "./_store_call.ts";
import {
  judged,
  quoteTable,
  type SqliteStatements,
  sqliteStatements,
} from "./_sqlite_sql.ts";
import {
  failure,
  migrateOn,
  openFile,
  sqliteSettings,
  type SqliteStoreOptions,
  type SqliteSweepOptions,
} from "./_sqlite_options.ts";
import {
  plain,
  SqliteUnit,
  type TransactionalHandler,
  type TransactionSetup,
  WriteTurn,
} from "./_sqlite_transaction.ts";

export { DEFAULT_TABLE, sqliteMigration } from "./_sqlite_sql.ts";
export type { TransactionalHandler } from "./_sqlite_transaction.ts";
export type {
  SqliteStoreOptions,
  SqliteSweepOptions,
} from "./_sqlite_options.ts";

const CLAIM_ATTEMPTS = 4;
type Statement = keyof SqliteStatements;

/**
 * An {@linkcode IdempotencyStore} in an SQLite table on `node:sqlite`'s
 * `DatabaseSync`, in WAL mode: each operation one statement on the database's
 * clock. A claim reads first: a replay or a conflict is one `SELECT` that
 * takes no write lock; a free slot then gets one insert-or-take-over upsert
 * with `RETURNING`. Processes sharing the file share the store.
 *
 * `DatabaseSync` blocks the event loop for each statement (bench/README.md,
 * "SqliteStore": about 6 µs a replay; 40 µs a new key under
 * `synchronous=NORMAL`, 0.3 ms under `FULL`; 1.3 – 2.3 ms a sweep batch), and
 * up to `busyTimeoutMs` while another process holds the write lock. A
 * {@linkcode SqliteStore.transactional} handler holds it for its whole length:
 * other processes' writes (new keys, completions, renewals) stop their event
 * loops up to `busyTimeoutMs`, then fail (503); this process's wait, without
 * blocking, up to `timeoutMs`. Keep such handlers to milliseconds, well under
 * the lease, writing only through the connection they are given.
 *
 * @example Guard a handler with records in an SQLite file
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { SqliteStore } from "@idempotent/http/sqlite";
 * import { accountOf } from "./auth.ts"; // request => the stable account id
 *
 * const store = new SqliteStore({ database: "app.db" });
 * await store.migrate();
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
   * Makes a store on a database, opening a path. Run
   * {@linkcode SqliteStore.migrate} (or {@linkcode sqliteMigration}) first.
   *
   * @throws {TypeError} When `database` is neither a `DatabaseSync` nor a
   * path of a file, `table` is invalid, or an option is unknown.
   * @throws {RangeError} When `timeoutMs` or `busyTimeoutMs` is.
   */
  constructor(options: SqliteStoreOptions) {
    const settings = sqliteSettings(options);
    const { timeoutMs, table: name } = settings;
    ({ db: this.#db, owned: this.#owned, file: this.#file } = settings);
    this.#name = name;
    this.#table = quoteTable(name);
    this.#busyTimeoutMs = settings.busyTimeoutMs;
    this.#text = sqliteStatements(this.#table);
    const failed = (operation: Operation, cause: unknown) =>
      failure(operation, cause, name);
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
      connection: () =>
        this.#txDb ??= openFile(this.#file, this.#busyTimeoutMs),
      complete: (db) => this.#txComplete ??= db.prepare(this.#text.complete),
    };
  }

  /** The table, quoted as it appears in the store's SQL. */
  get table(): string {
    return this.#table;
  }

  /**
   * Puts the file in WAL mode, gives the connection a `busy_timeout` if it
   * has none, and creates what {@linkcode sqliteMigration} does if absent, in
   * one `BEGIN IMMEDIATE`: safe from several processes at once.
   *
   * @throws {Error} When the file cannot be put in WAL mode (an in-memory
   * database), or the database refuses (read-only).
   */
  async migrate(): Promise<void> {
    await this.#turn.take();
    try {
      migrateOn(this.#db, this.#name, this.#busyTimeoutMs);
    } finally {
      this.#turn.give();
    }
  }

  /**
   * Deletes expired rows, `batchSize` a statement until a batch deletes
   * fewer, and returns how many (expired rows never block: this reclaims
   * space). Each batch holds the write lock and the event loop.
   *
   * @throws {RangeError} When `batchSize` is not a positive integer.
   * @throws {StoreError} When a batch fails.
   */
  async sweep(options: SqliteSweepOptions = {}): Promise<number> {
    return await sweepInBatches(
      options,
      (size) => this.#write("forget", () => this.#run("sweep", [size])),
    );
  }

  /** {@linkcode IdempotencyStore.claim}: one `SELECT`, and one upsert when the slot is free. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    let token = ""; // made only for a write: judged() leaves out the row's
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const row = judged(
        this.#now("claim", () => this.#get("read", [slot])),
      );
      if (row !== undefined && !row.free) return decodeClaim(row, token);
      token ||= crypto.randomUUID();
      const params = [slot, fingerprint, token, leaseMs, ttlMs];
      const taken = await this.#write("claim", () => this.#get("take", params));
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
    return await this.#fenced(
      "complete",
      completeParams(slot, token, response),
    );
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
   * The connection (the store's own, to the same file, so that nothing else
   * joins) holding the request's `BEGIN IMMEDIATE` transaction, opened on
   * first call: what is written on it commits with the record or not at all
   * (a throw, an uncacheable response or a lost claim rolls back).
   *
   * @throws {TypeError} When this store's middleware did not claim the
   * request (no key, unguarded, a replay, or another store's).
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
   * Wraps a handler so that its second argument is the request's
   * {@linkcode SqliteStore.transaction}. A request no store claimed (no key, a
   * GET, `failOpen`) gets a plain one, the write lock held too: committed
   * when the handler returns, whatever its status, rolled back on a throw.
   *
   * @throws {TypeError} When `handler` is not a function; from the wrapper, on
   * a request another store claimed (a FailoverStore's).
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
      if (!this.#units.has(request) && !isClaimed(request)) {
        // No key, a method not guarded, failOpen: a transaction of its own.
        return await plain(this.#setup, handler, request, args);
      }
      return await handler(request, await this.transaction(request), ...args);
    };
  }

  /** {@linkcode IdempotencyStore.unitOfWork}: the request's, for {@linkcode SqliteStore.transaction}. */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new SqliteUnit(this.#setup, slot, token);
    this.#units.set(request, unit);
    return unit;
  }

  /** {@linkcode IdempotencyStore.peek}: one `SELECT` (the body's length; the body too with `response: true`). */
  // deno-lint-ignore require-await -- async, so that a throw rejects
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    const response = options?.response === true;
    const params = [slot, response ? 1 : 0];
    const row = this.#now("peek", () => this.#get("peek", params));
    if (row !== undefined) row.has_token = row.has_token === 1; // a boolean
    return decodePeek(row, response);
  }

  /** {@linkcode IdempotencyStore.forget}: `DELETE`s the slot's row. */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    const row = await this.#write("forget", () => this.#get("forget", [slot]));
    return row?.live === 1 ? "deleted" : "absent";
  }

  /** {@linkcode IdempotencyStore.stats}: one exact count of the live rows, a scan of the table. */
  // deno-lint-ignore require-await -- async, so that a throw rejects
  async stats(_options?: { limit?: number }): Promise<StoreStats> {
    return statsOf(this.#now("stats", () => this.#get("stats", [])) ?? {});
  }

  /** Closes the connections the store opened (an app's `DatabaseSync` stays open). */
  close(): void {
    for (const db of [this.#txDb, this.#owned ? this.#db : undefined]) {
      try {
        db?.close();
      } catch { /* closed already */ }
    }
  }

  #statement(name: Statement): StatementSync {
    let statement = this.#prepared.get(name);
    if (statement === undefined) {
      statement = this.#db.prepare(this.#text[name]);
      // Arrays are cheaper to build than named rows (judged() reads both).
      const arrays = statement as { setReturnArrays?: (on: boolean) => void };
      if (name === "read") arrays.setReturnArrays?.(true);
      this.#prepared.set(name, statement);
    }
    return statement;
  }

  #get(name: Statement, params: Parameter[]): Row | undefined {
    return this.#statement(name).get(...params) as Row | undefined;
  }

  #run(name: Statement, params: Parameter[]): number {
    return Number(this.#statement(name).run(...params).changes);
  }

  /** Runs a statement now: its whole time is synchronous; its error a StoreError. */
  #now<T>(operation: Operation, work: () => T): T {
    try {
      return work();
    } catch (error) {
      throw failure(operation, error, this.#name);
    }
  }

  /** A write: now, or in its turn after this process's transaction, within `timeoutMs`. */
  #write<T>(operation: Operation, work: () => T): T | Promise<T> {
    if (this.#turn.free) return this.#now(operation, work);
    return this.#calls.run(operation, async (call) => {
      await this.#turn.take();
      try {
        call.throwIfExpired();
        return work();
      } finally {
        this.#turn.give();
      }
    });
  }

  async #fenced(op: Fenced, params: Parameter[]): Promise<WriteOutcome> {
    const changes = await this.#write(op, () => this.#run(op, params));
    return changes === 1 ? "applied" : "lost";
  }
}

type Parameter = string | number | Uint8Array | null;
type Fenced = "complete" | "release" | "extend";
type Row = Record<string, unknown>;
