// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A durable, auditable {@linkcode IdempotencyStore} in PostgreSQL, on
 * [postgres.js](https://github.com/porsager/postgres): the record lives beside
 * the application's own data, one row per slot.
 *
 * Every operation is one SQL statement (one round trip, its own implicit
 * transaction), timed by the database's clock. The store never holds a
 * connection while the handler runs, so it works on a pool of one.
 *
 * @example Guard a handler with records in PostgreSQL
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { PostgresStore } from "@idempotent/http/postgres";
 * import postgres from "postgres";
 *
 * const sql = postgres("postgres://postgres@127.0.0.1:5432/app");
 * const store = new PostgresStore({ sql });
 * await store.migrate();
 * setInterval(() => store.sweep().catch(() => {}), 60_000);
 *
 * const handler = idempotency(() => Response.json({ id: 1 }, { status: 201 }), { store });
 * const res = await handler(
 *   new Request("http://localhost/payments", {
 *     method: "POST",
 *     headers: { "idempotency-key": "k-1" },
 *   }),
 * );
 * console.log(res.status); // 201, and a retry replays it
 * ```
 *
 * @module
 */

import type { TransactionSql } from "postgres";
import { StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  StoreOperation,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
import { assertSlot, claimOptions, durationMs } from "../store.ts";
import { assertStoredResponse, encodeHeaders } from "../_record.ts";
import { Orphans } from "./_orphans.ts";
import {
  decodeClaim,
  DEFAULT_TABLE,
  parseTable,
  postgresMigration,
  type PostgresRow,
  type Statements,
  statements,
} from "./_postgres_sql.ts";
import { StoreCalls } from "./_store_call.ts";

export * from "./_contract.ts";
export {
  DEFAULT_TABLE,
  postgresMigration,
  type PostgresRow,
} from "./_postgres_sql.ts";

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
  /** A postgres.js instance, `postgres(url)`; the store never ends it. */
  sql: PostgresSql;
  /**
   * The table, optionally schema-qualified (`"app.idempotency_keys"`). A dot
   * separates the schema from the table; each part is quoted, so any other
   * character is kept as written. The table part is at most 48 bytes (its
   * index is named after it). {@linkcode PostgresStore.migrate} creates the
   * schema when it is missing.
   *
   * @default {"idempotency_keys"}
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

/** A handler that runs its SQL in the request's transaction. */
export type TransactionalHandler<A extends unknown[]> = (
  request: Request,
  tx: TransactionSql,
  ...args: A
) => Response | Promise<Response>;

/** How many times a claim statement runs when it keeps meeting concurrent claims. */
const CLAIM_ATTEMPTS = 4;

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

/**
 * Keeps idempotency records in a PostgreSQL table through postgres.js.
 *
 * One row per slot. `claim` is a single `INSERT … ON CONFLICT … DO UPDATE …
 * RETURNING` that reserves a free slot or reads what holds it (a replay or a
 * conflict writes nothing and takes no row lock; in the rare race where
 * another claim commits between the statement's snapshot and its upsert, the
 * statement runs again); `complete`,
 * `release` and `extend` are single statements fenced by the claim's token.
 * Time is the database's (`statement_timestamp()`), never the app's. Expired
 * rows never block; {@linkcode PostgresStore.sweep} deletes them.
 *
 * **A claim that failed leaves nothing behind.** The timeout stops waiting
 * for the statement but does not cancel it (a cancel request names a
 * connection, and postgres.js pipelines statements on one: see
 * `timeoutMs`), so a claim that timed out may still commit; so may one
 * cancelled by a server-side `statement_timeout` that arrives too late (a
 * test reproduces this). The store made the claim's token, so it
 * watches a claim that timed out: if its statement commits after all, or
 * fails with an unknown outcome (the connection broke under it), the store
 * sends a `release` fenced by that token, retried with a backoff and at once
 * when the database answers anything, until it answers or the orphan's lease
 * has run out. A statement the server refused or cancelled (an SQLSTATE,
 * such as 57014) rolled back whole and needs nothing. A claim whose outcome
 * never comes back lives at most one lease, as does one past the bound of
 * 10,000 pending undos per store. The undo emits nothing.
 *
 * **After lost connections, postgres.js 3.4.9 may stay unusable.** When its
 * backends are terminated under load (a failover, `pg_terminate_backend`),
 * a connection whose socket died with a write still queued sends nothing
 * again until a connect times out (`connect_timeout`, 30 s by default,
 * several times over), and the wait before a reconnect grows with every
 * connection lost, up to 20 s (`backoff`). The store answers each statement
 * within `timeoutMs` meanwhile (503s, nothing runs twice), but to recover in
 * about a second give the client a short `connect_timeout` and a bounded
 * `backoff`: `postgres(url, { connect_timeout: 1, backoff: () => 0.1 })`
 * (the fault suite's setting).
 *
 * **Exactly once for the handler's own rows (opt-in).** A handler can run
 * its SQL in a transaction that commits together with the record:
 * `idempotency(store.transactional((req, tx) => …), { store })`, or
 * `await store.transaction(request)` from inside any guarded handler (a
 * Hono route: `c.req.raw`). The design:
 *
 * - The core knows no driver: a store may offer the optional
 *   {@linkcode IdempotencyStore.unitOfWork} capability; the middleware asks
 *   for a unit per claimed request and, if the handler opened it, commits
 *   the record through it instead of `complete`. This store remembers the
 *   request (a `WeakMap`), so the handler finds its transaction by it.
 * - The claim stays outside, one statement committed at once, so
 *   duplicates see it (409) while the handler runs; the lease is renewed
 *   on other connections of the pool, and stops just before the record's
 *   write. The transaction is `sql.begin` at `transaction.isolation`, with
 *   `SET LOCAL statement_timeout` first.
 * - 2xx: the body is captured as usual (a body over `maxResponseBytes`, a
 *   stream error or a body too slow is recorded without it), then the
 *   `complete` statement runs in the transaction, fenced by the token, and
 *   the transaction commits. No row changed (the claim was taken over after
 *   its lease ran out): roll back, 409, `completed` with outcome `lost`.
 *   The rows of a fenced-out owner never commit.
 * - A throw, or a response that is not cacheable: roll back, release. The
 *   writes of a 4xx do not commit, so the retry it invites starts clean.
 * - The transaction fails (a serialization failure, a lost connection, at
 *   any statement or at COMMIT): a `release` fenced by the token, outside
 *   it, tells what happened, since it deletes only a claim still in
 *   flight: `applied` means nothing committed (503, the retry runs once),
 *   `lost` that it committed or was taken over (409, the retry replays);
 *   no answer, 503, and the lease runs out if nothing committed.
 * - A pool of one would starve the renewals: `transaction()` refuses it
 *   (`RangeError`). A FailoverStore opens no unit, so `transaction()`
 *   rejects there (`TypeError`): a Redis record cannot commit with rows.
 * - postgres.js 3.4.9 rejects `begin` as soon as its connection closes and
 *   then throws out of a timer (uncaught) on anything sent on it, COMMIT and
 *   ROLLBACK included: the store sends nothing more on such a transaction,
 *   and a handler should not either. A connection that closes while the
 *   record's write or COMMIT is on its way can still meet that race (the
 *   process ends on the uncaught error): as after any crash, the
 *   transaction committed whole or not at all, and a retry replays or runs.
 *
 * @example Claim, complete and replay (needs a database)
 * ```ts ignore
 * import { PostgresStore } from "@idempotent/http/postgres";
 * import postgres from "postgres";
 * import assert from "node:assert/strict";
 *
 * const sql = postgres("postgres://postgres@127.0.0.1:5432/test");
 * const store = new PostgresStore({ sql });
 * await store.migrate();
 * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 86_400_000 };
 * const claim = await store.claim("slot-1", options);
 * if (claim.state === "acquired") {
 *   await store.complete("slot-1", claim.token, { status: 201, headers: [], body: new Uint8Array([1]) });
 * }
 * assert.equal((await store.claim("slot-1", options)).state, "completed");
 * await sql.end();
 * ```
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
export class PostgresStore implements IdempotencyStore {
  #sql: PostgresSql;
  #table: string;
  #name: string;
  #statements: Statements;
  #orphans = new Orphans((slot, token) => this.release(slot, token));
  #calls: StoreCalls;
  #units = new WeakMap<Request, PostgresUnit>();
  #begin: string;
  #statementTimeoutMs: number;

  /**
   * Makes a store on a postgres.js instance. It connects nothing: run
   * {@linkcode PostgresStore.migrate} (or {@linkcode postgresMigration}'s SQL)
   * once before use.
   *
   * @param options The `sql` instance, the table and the timeout.
   * @throws {TypeError} When `table` is not a valid name.
   * @throws {RangeError} When `timeoutMs` is not a positive number.
   */
  constructor(options: PostgresStoreOptions) {
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
    this.#sql = options.sql;
    this.#table = parseTable(name).quoted;
    this.#name = name;
    this.#calls = new StoreCalls(timeoutMs, this.#orphans, {
      failed: failure,
      // No `query.cancel()`: a cancel request names a connection, not a
      // statement, and postgres.js pipelines statements on a connection, so
      // it can stop another slot's statement and, as seen under a table
      // lock, hand one statement another's reply. The statement is left to
      // finish; a claim among them is undone when it commits late.
      timedOut: (operation) =>
        failure(operation, new Error(`No answer within ${timeoutMs} ms`)),
    });
    this.#statements = statements(this.#table);
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
    this.#begin = `isolation level ${isolation}`;
    this.#statementTimeoutMs = statementTimeoutMs;
  }

  /** The table, quoted as it appears in the store's SQL. */
  get table(): string {
    return this.#table;
  }

  /**
   * Creates the schema (when the table names one), the table and its index
   * if they are absent. Safe to run from several instances at once: the
   * statements go as one transaction that first takes an advisory lock.
   *
   * @returns When the table exists.
   * @throws {Error} The driver's error when the database refuses (no privilege to create a missing schema or the table).
   */
  async migrate(): Promise<void> {
    // No parameters: postgres.js sends one simple-protocol query, which the
    // server runs as one implicit transaction, so the advisory lock is held
    // until both CREATEs commit.
    const text = postgresMigration(this.#name);
    try {
      await this.#sql.unsafe(text);
    } catch (error) {
      // Belt and braces: a catalog race the lock did not cover (say, a
      // migration run by other means) leaves the objects in place.
      if (!isDuplicate(error)) throw error;
      await this.#sql.unsafe(text);
    }
  }

  /**
   * Deletes expired rows, in batches of at most `batchSize` rows, each its
   * own statement, until a batch deletes fewer. Expired rows never block a
   * claim whether or not they are swept; sweeping only reclaims space. Run
   * it on a timer, or schedule the same delete in the database (pg_cron:
   * `DELETE FROM idempotency_keys WHERE expires_at <= now()`).
   *
   * @param options The batch size.
   * @returns How many rows were deleted.
   * @throws {RangeError} When `batchSize` is not a positive integer.
   * @throws {Error} The driver's error when a batch fails.
   */
  async sweep(options: PostgresSweepOptions = {}): Promise<number> {
    const batchSize = options.batchSize ?? 1000;
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new RangeError(
        `'batchSize' must be a positive integer: current value is ${batchSize}`,
      );
    }
    let total = 0;
    while (true) {
      const result = await this.#sql.unsafe(this.#statements.sweep, [
        batchSize,
      ], { prepare: this.#prepare });
      total += result.count;
      if (result.count < batchSize) return total;
    }
  }

  /**
   * Reserves `slot` if it is free, or reports what holds it, in one
   * statement.
   *
   * @param slot The slot, at most 256 bytes.
   * @param options The fingerprint, lease and TTL of the claim.
   * @returns What the claim found.
   * @throws {TypeError} When `slot` is not a valid slot.
   * @throws {RangeError} When `leaseMs` or `ttlMs` is not a positive number.
   * @throws {StoreError} When the database cannot be reached or does not answer in time.
   */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    options = claimOptions(options);
    const token = crypto.randomUUID();
    const params = [
      slot,
      options.fingerprint,
      token,
      options.leaseMs,
      options.ttlMs,
    ];
    // Almost always one statement. A row committed by another claim after
    // this statement's snapshot shows as no row, or as the free row read
    // while the upsert found it taken: look again, a few times at most.
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const rows = await this.#run("claim", this.#statements.claim, params, {
        slot,
        token,
        leaseMs: options.leaseMs,
      });
      const row = rows[0];
      if (row === undefined || row.free === true) continue;
      return decodeClaim(row, token);
    }
    // Still racing: someone holds the slot right now.
    return { state: "in_flight", fingerprint: null, retryAfterMs: 1 };
  }

  /**
   * Records `response` as the slot's answer if `token` still owns it; the
   * row keeps the first claim's deadline.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param response The response to replay.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` or `response` is invalid.
   * @throws {StoreError} When the outcome is unknown.
   */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    const rows = await this.#run("complete", this.#statements.complete, [
      slot,
      String(token),
      response.status,
      encodeHeaders(response.headers),
      response.body,
      response.body === null ? response.omitted! : null,
    ]);
    return rows.count === 1 ? "applied" : "lost";
  }

  /**
   * Deletes the claim if `token` still owns it, so that the next request
   * runs.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is invalid.
   * @throws {StoreError} When the outcome is unknown.
   */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    const rows = await this.#run("release", this.#statements.release, [
      slot,
      String(token),
    ]);
    return rows.count === 1 ? "applied" : "lost";
  }

  /**
   * Renews the lease to `leaseMs` from now (the database's now) if `token`
   * still owns the slot; the deadline stays.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param leaseMs The new lease, from now.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is invalid.
   * @throws {RangeError} When `leaseMs` is not a positive number.
   * @throws {StoreError} When the outcome is unknown.
   */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    leaseMs = durationMs("leaseMs", leaseMs);
    const rows = await this.#run("extend", this.#statements.extend, [
      slot,
      String(token),
      leaseMs,
    ]);
    return rows.count === 1 ? "applied" : "lost";
  }

  /**
   * The request's transaction, opened on first call (later calls get the
   * same one): the handler's SQL in it commits together with the request's
   * record, or not at all. Call it from a handler guarded by
   * `idempotency(handler, { store })` with this store, passing the request
   * the handler received (in Hono, `c.req.raw`).
   *
   * @param request The request the guarded handler received.
   * @returns The transaction, postgres.js's own `TransactionSql`.
   * @throws {TypeError} When the request is not one this store's middleware
   * claimed (an unguarded request, a request without a key, a replay, or a
   * middleware on another store such as a FailoverStore), or `sql` has no
   * `begin`.
   * @throws {RangeError} When the pool holds fewer than two connections:
   * the transaction holds one while the lease renewals need another.
   *
   * @example Read the request's transaction from a Hono route
   * ```ts ignore
   * app.post("/orders", idempotent({ store }), async (c) => {
   *   const tx = await store.transaction(c.req.raw);
   *   const [order] = await tx`INSERT INTO orders (item) VALUES ('book') RETURNING id`;
   *   return c.json(order, 201);
   * });
   * ```
   */
  transaction(request: Request): Promise<TransactionSql> {
    const unit = this.#units.get(request);
    if (unit === undefined) {
      return Promise.reject(
        new TypeError(
          "No transaction for this request: only a request this PostgresStore's middleware claimed has one (pass the request the handler received; a FailoverStore does not open one)",
        ),
      );
    }
    return unit.open();
  }

  /**
   * Wraps a handler so that it receives the request's transaction (see
   * {@linkcode PostgresStore.transaction}) as its second argument.
   *
   * @typeParam A The handler's arguments after the request.
   * @param handler The handler, `(request, tx, ...args)`.
   * @returns A handler to guard with `idempotency(…, { store })`.
   *
   * @example An order and its record in one transaction
   * ```ts ignore
   * const store = new PostgresStore({ sql });
   * Deno.serve(idempotency(store.transactional(async (req, tx) => {
   *   const [order] = await tx`INSERT INTO orders (item) VALUES ('book') RETURNING id`;
   *   return Response.json(order, { status: 201 });
   * }), { store }));
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
    return async (request, ...args) =>
      await handler(request, await this.transaction(request), ...args);
  }

  /**
   * The capability the middleware uses (see
   * {@linkcode IdempotencyStore.unitOfWork}): remembers the claimed request,
   * so that its handler can open the transaction.
   *
   * @param request The request the handler receives.
   * @param slot The claimed slot.
   * @param token The claim's token.
   * @returns The request's unit of work, opened by
   * {@linkcode PostgresStore.transaction}.
   */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new PostgresUnit({
      sql: this.#sql,
      begin: this.#begin,
      statementTimeoutMs: this.#statementTimeoutMs,
      complete: this.#statements.complete,
      prepare: this.#prepare,
      slot,
      token,
    });
    this.#units.set(request, unit);
    return unit;
  }

  get #prepare(): boolean {
    return this.#sql.options?.prepare ?? true;
  }

  /**
   * Runs one statement under the timeout, turning every failure into a
   * {@linkcode StoreError}. A claim passes its token: a claim statement that
   * timed out may commit anyway (the cancel is a request that can come too
   * late), and one whose connection broke may have committed, so either is
   * undone by a release fenced by that token (see {@linkcode Orphans}).
   */
  #run(
    operation: StoreOperation,
    text: string,
    parameters: (string | number | Uint8Array | null)[],
    claim?: { slot: string; token: string; leaseMs: number },
  ): Promise<PostgresRow[] & { count: number }> {
    return this.#calls.run(
      operation,
      () => this.#sql.unsafe(text, parameters, { prepare: this.#prepare }),
      claim && {
        ...claim,
        acquired: (rows) =>
          rows[0]?.token === claim.token ? claim.token : undefined,
        mayHaveRun: mayHaveCommitted,
      },
    );
  }
}

/** Thrown inside a transaction to roll it back. */
const ROLLBACK = Symbol("rollback");
/** Thrown inside a transaction whose fenced record write found the claim lost. */
const LOST = Symbol("lost");

/**
 * One claimed request's transaction: opened by the handler, held open until
 * the middleware commits it with the record or rolls it back.
 */
interface UnitSetup {
  sql: PostgresSql;
  begin: string;
  statementTimeoutMs: number;
  complete: string;
  prepare: boolean;
  slot: string;
  token: string;
}

class PostgresUnit implements UnitOfWork {
  #setup: UnitSetup;
  #tx: Promise<TransactionSql> | undefined;
  /** The `sql.begin` under way: resolves once committed. */
  #done: Promise<unknown> | undefined;
  /** Hands the transaction the middleware's decision: a record, or roll back. */
  #decide: (record: StoredResponse | null) => void = () => {};

  constructor(setup: UnitSetup) {
    this.#setup = setup;
  }

  get opened(): boolean {
    return this.#tx !== undefined;
  }

  open(): Promise<TransactionSql> {
    if (this.#tx !== undefined) return this.#tx;
    const { sql, begin, statementTimeoutMs, complete, prepare, slot, token } =
      this.#setup;
    if (typeof sql.begin !== "function") {
      return Promise.reject(
        new TypeError(
          "'sql' must be a postgres.js instance: it has no begin()",
        ),
      );
    }
    const max = sql.options?.max;
    if (max !== undefined && max < 2) {
      return Promise.reject(
        new RangeError(
          `A transaction needs a pool of at least 2 connections (the transaction holds one, the lease renewals need another): 'max' is ${max}`,
        ),
      );
    }
    const decision = new Promise<StoredResponse | null>((resolve) => {
      this.#decide = resolve;
    });
    let ended = false;
    this.#tx = new Promise<TransactionSql>((resolve, reject) => {
      this.#done = sql.begin!(begin, async (tx) => {
        if (statementTimeoutMs > 0) {
          await tx.unsafe(
            `SET LOCAL statement_timeout = ${statementTimeoutMs}`,
          );
        }
        resolve(tx);
        const record = await decision;
        // postgres.js 3.4.9 rejects `begin` as soon as the connection
        // closes, and then whatever it sends on that connection (a
        // statement, or the COMMIT or ROLLBACK that ends this callback)
        // throws out of a timer, uncaught. So once it closed, this callback
        // never ends: it holds nothing but itself.
        if (ended) await new Promise<never>(() => {});
        if (record === null) throw ROLLBACK;
        const rows = await tx.unsafe(complete, [
          slot,
          token,
          record.status,
          encodeHeaders(record.headers),
          record.body,
          record.body === null ? record.omitted! : null,
        ], { prepare });
        if (rows.count !== 1) throw LOST;
      });
      this.#done.catch((error) => {
        ended = true;
        reject(error);
      });
    });
    return this.#tx;
  }

  async commit(record: StoredResponse): Promise<"committed" | "lost"> {
    assertStoredResponse(record);
    this.#decide(record);
    try {
      await this.#done;
      return "committed";
    } catch (error) {
      if (error === LOST) return "lost";
      throw error;
    }
  }

  async rollback(): Promise<void> {
    this.#decide(null);
    await this.#done?.catch(() => {});
  }
}

/** A statement's failure as a {@linkcode StoreError}. */
function failure(operation: StoreOperation, cause: unknown): StoreError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new StoreError(
    `PostgreSQL ${operation} failed${
      operation === "claim" ? "" : " (outcome unknown)"
    }: ${reason}`,
    { operation, cause },
  );
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
function mayHaveCommitted(error: unknown): boolean {
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

/** Whether a migration failed only because an object already exists. */
function isDuplicate(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  // unique_violation on the catalog, duplicate_table, duplicate_object
  return code === "23505" || code === "42P07" || code === "42710";
}
