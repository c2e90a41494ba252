// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode PostgresStore}: idempotency records in PostgreSQL, on
 * postgres.js, beside the application's own data.
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
import { assertStoredResponse } from "../_record.ts";
import { Orphans } from "./_orphans.ts";
import {
  completeParams,
  decodeClaim,
  mayHaveCommitted,
  type PostgresRow,
  type PostgresSql,
  type Statements,
  statements,
} from "./_postgres_sql.ts";
import { migrate } from "./_postgres_migration.ts";
import {
  postgresSettings,
  type PostgresStoreOptions,
  type PostgresSweepOptions,
} from "./_postgres_options.ts";
import {
  PostgresTransactions,
  type TransactionalHandler,
} from "./_postgres_transaction.ts";
import { StoreCalls, type Undo } from "./_store_call.ts";

export * from "./_contract.ts";
export type {
  PostgresQuery,
  PostgresRow,
  PostgresSql,
} from "./_postgres_sql.ts";
export { DEFAULT_TABLE, postgresMigration } from "./_postgres_migration.ts";
export type {
  PostgresIsolation,
  PostgresStoreOptions,
  PostgresSweepOptions,
  PostgresTransactionOptions,
} from "./_postgres_options.ts";
export type { TransactionalHandler } from "./_postgres_transaction.ts";

/** A statement's rows, with the number of rows it changed. */
type Rows = PostgresRow[] & { count: number };
/** A statement's parameter. */
type Parameter = string | number | Uint8Array | null;

/** How many times a claim statement runs when it keeps meeting concurrent claims. */
const CLAIM_ATTEMPTS = 4;

/**
 * An {@linkcode IdempotencyStore} in a PostgreSQL table, through
 * [postgres.js](https://github.com/porsager/postgres): one row per slot,
 * beside the application's own data. Each operation is one statement (one
 * round trip, its own implicit transaction) timed by the database's clock;
 * no connection is held while the handler runs, so a pool of one works.
 * `claim` reserves a free slot or reads what holds it (a replay or a conflict
 * writes nothing and takes no row lock); `complete`, `release` and `extend`
 * are fenced by the claim's token. Expired rows never block;
 * {@linkcode PostgresStore.sweep} deletes them.
 *
 * **A claim that failed leaves nothing behind.** A timeout stops the waiting,
 * not the statement (see `timeoutMs`), so a claim that timed out, or that a
 * server-side `statement_timeout` cancelled too late, may still commit. When
 * it does, or fails with an unknown outcome (a broken connection), the store
 * sends a `release` fenced by the claim's token until the database answers
 * or the lease has run out; one the server refused (an SQLSTATE such as
 * 57014) rolled back whole. A claim whose outcome never comes back, or one
 * past 10,000 pending undos, lives at most one lease.
 *
 * **Exactly once for the handler's own rows (opt-in).** A handler can run its
 * SQL in a transaction that commits together with the record:
 * `idempotency(store.transactional((req, tx) => …), { store, scope })`, or
 * `await store.transaction(request)` in any guarded handler (in Hono,
 * `c.req.raw`). The claim stays outside, committed at once, so duplicates get
 * 409 while the handler runs, and the lease is renewed on other connections
 * of the pool until the record's write.
 *
 * - 2xx: the body is captured as usual, then the record is written in the
 *   transaction, fenced by the token, and it commits. No row changed (the
 *   claim was taken over): roll back, 409, `completed` with outcome `lost`.
 * - A throw, or a response that is not cacheable: roll back, release. The
 *   writes of a 4xx do not commit, so the retry it invites starts clean.
 * - The transaction fails (a serialization failure, a lost connection, at
 *   any statement or at COMMIT): a fenced `release` tells what happened:
 *   `applied`, nothing committed (503, the retry runs once); `lost`, it
 *   committed or was taken over (409, the retry replays); no answer, 503.
 * - A FailoverStore opens no unit, so `transaction()` rejects there
 *   (`TypeError`): a Redis record cannot commit with rows.
 * - Once postgres.js 3.4.9 rejected `begin` because its connection closed,
 *   anything sent on it throws out of a timer, uncaught: the store sends
 *   nothing more on it, and a handler should not either. Should the
 *   connection close while the record's write or COMMIT is under way, the
 *   process may end on that error; the transaction committed whole or not
 *   at all, as after any crash.
 *
 * @example Guard a handler with records in PostgreSQL
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { PostgresStore } from "@idempotent/http/postgres";
 * import postgres from "postgres";
 * import { accountOf } from "./auth.ts"; // request => the stable account id
 *
 * const sql = postgres("postgres://postgres@127.0.0.1:5432/app");
 * const store = new PostgresStore({ sql });
 * await store.migrate();
 * setInterval(() => store.sweep().catch(() => {}), 60_000);
 *
 * const handler = idempotency(() => Response.json({ id: 1 }, { status: 201 }), {
 *   store,
 *   scope: accountOf, // the caller's account, resolved after authentication
 * });
 * const res = await handler(
 *   new Request("http://localhost/payments", {
 *     method: "POST",
 *     headers: { "idempotency-key": "k-1" },
 *   }),
 * );
 * console.log(res.status); // 201, and a retry replays it
 * ```
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
 */
export class PostgresStore implements IdempotencyStore {
  #sql: PostgresSql;
  #table: string;
  #name: string;
  #statements: Statements;
  #orphans = new Orphans((slot, token) => this.release(slot, token));
  #calls: StoreCalls;
  #transactions: PostgresTransactions;

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
    const { sql, table, name, timeoutMs, transaction } = postgresSettings(
      options,
    );
    this.#sql = sql;
    this.#table = table;
    this.#name = name;
    this.#calls = new StoreCalls(timeoutMs, this.#orphans, {
      failed: failure,
      // No `query.cancel()`: a cancel request names a connection, and
      // postgres.js pipelines statements on one, so it could stop another
      // slot's statement. A late claim is undone once it commits instead.
      timedOut: (operation) =>
        failure(operation, new Error(`No answer within ${timeoutMs} ms`)),
    });
    this.#statements = statements(table);
    const { complete } = this.#statements;
    this.#transactions = new PostgresTransactions({ ...transaction, complete });
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
    await migrate(this.#sql, this.#name);
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
    const text = this.#statements.sweep;
    const prepare = this.#prepare;
    let total = 0;
    while (true) {
      const { count } = await this.#sql.unsafe(text, [batchSize], { prepare });
      total += count;
      if (count < batchSize) return total;
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
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    const token = crypto.randomUUID();
    const params = [slot, fingerprint, token, leaseMs, ttlMs];
    // A claim statement that timed out may commit anyway, and one whose
    // connection broke may have committed: either is undone by a release
    // fenced by the token (see Orphans).
    const undo: Undo<Rows> = {
      slot,
      token,
      leaseMs,
      acquired: (rows) => rows[0]?.token === token ? token : undefined,
      mayHaveRun: mayHaveCommitted,
    };
    // Almost always one statement. A row committed by another claim after
    // this statement's snapshot shows as no row, or as the free row read
    // while the upsert found it taken: look again, a few times at most.
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const row = (await this.#run("claim", params, undo))[0];
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
    const params = completeParams(slot, token, response);
    return await this.#fenced("complete", params);
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
    return await this.#fenced("release", [slot, String(token)]);
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
    return await this.#fenced("extend", [slot, String(token), leaseMs]);
  }

  /**
   * The request's transaction, opened on first call (later calls get the
   * same one): the handler's SQL in it commits together with the request's
   * record, or not at all. Call it from a handler guarded by
   * `idempotency(handler, { store, scope })` with this store, passing the
   * request the handler received (in Hono, `c.req.raw`).
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
   * app.post("/orders", idempotent({ store, scope: accountOf }), async (c) => {
   *   const tx = await store.transaction(c.req.raw);
   *   const [order] = await tx`INSERT INTO orders (item) VALUES ('book') RETURNING id`;
   *   return c.json(order, 201);
   * });
   * ```
   */
  transaction(request: Request): Promise<TransactionSql> {
    return this.#transactions.transaction(request);
  }

  /**
   * Wraps a handler so that it receives the request's transaction (see
   * {@linkcode PostgresStore.transaction}) as its second argument.
   *
   * @typeParam A The handler's arguments after the request.
   * @param handler The handler, `(request, tx, ...args)`.
   * @returns A handler to guard with `idempotency(…, { store, scope })`.
   *
   * @example An order and its record in one transaction
   * ```ts ignore
   * const store = new PostgresStore({ sql });
   * Deno.serve(idempotency(store.transactional(async (req, tx) => {
   *   const [order] = await tx`INSERT INTO orders (item) VALUES ('book') RETURNING id`;
   *   return Response.json(order, { status: 201 });
   * }), { store, scope: accountOf }));
   * ```
   */
  transactional<A extends unknown[]>(
    handler: TransactionalHandler<A>,
  ): (request: Request, ...args: A) => Promise<Response> {
    return this.#transactions.transactional(handler);
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
    return this.#transactions.unitOfWork(request, slot, token);
  }

  get #prepare(): boolean {
    return this.#sql.options?.prepare ?? true;
  }

  /** Runs a write fenced by the claim's token: one row changed, or none. */
  async #fenced(
    operation: "complete" | "release" | "extend",
    parameters: Parameter[],
  ): Promise<WriteOutcome> {
    const rows = await this.#run(operation, parameters);
    return rows.count === 1 ? "applied" : "lost";
  }

  /** Runs the statement of `operation` under the timeout (see StoreCalls). */
  #run(
    operation: "claim" | "complete" | "release" | "extend",
    parameters: Parameter[],
    undo?: Undo<Rows>,
  ): Promise<Rows> {
    const text = this.#statements[operation];
    return this.#calls.run(
      operation,
      () => this.#sql.unsafe(text, parameters, { prepare: this.#prepare }),
      undo,
    );
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
