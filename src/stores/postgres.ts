// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode PostgresStore}: idempotency records in PostgreSQL, on
 * postgres.js, beside the application's own data.
 *
 * @module
 */

import type { TransactionSql } from "postgres";
import { assertSlot, StoreError } from "../store.ts";
import { claimOptions, durationMs } from "./_shared.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  IdempotencyStore,
  PeekOptions,
  PeekResult,
  StoredResponse,
  StoreEvent,
  StoreStats,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { SealCount } from "../_seal.ts";
import type { Orphans } from "./_orphans.ts";
import { completeParams, decodeClaim, decodePeek } from "./_sql_rows.ts";
import {
  mayHaveCommitted,
  type PostgresRow,
  type PostgresSql,
  type Statements,
  statements,
} from "./_postgres_sql.ts";
import { migrate } from "./_postgres_migration.ts";
import { isClaimed } from "../_claimed.ts";
import {
  postgresSettings,
  type PostgresStoreOptions,
  type PostgresSweepOptions,
} from "./_postgres_options.ts";
import {
  assertPool,
  inPlainTransaction,
  PostgresUnit,
  type TransactionalHandler,
  type TransactionSetup,
} from "./_postgres_transaction.ts";
import {
  type Operation,
  serviceCalls,
  type StoreCalls,
  type Undo,
} from "./_store_call.ts";

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

type Rows = PostgresRow[] & { count: number };
type Parameter = string | number | Uint8Array | null;

const CLAIM_ATTEMPTS = 4;

/**
 * An {@linkcode IdempotencyStore} in a PostgreSQL table, through
 * [postgres.js](https://github.com/porsager/postgres), one row per slot.
 * Each operation is one statement timed by the database's clock; a replay or
 * a conflict writes nothing and takes no row lock, and no connection is held
 * while the handler runs. Expired rows never block;
 * {@linkcode PostgresStore.sweep} deletes them. A claim that fails but may
 * have committed is undone, never cancelled (docs/architecture.md, "Nothing
 * left behind"). The handler's own rows can commit with the record:
 * {@linkcode PostgresStore.transaction}.
 *
 * @example Guard a handler with records in PostgreSQL
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { PostgresStore } from "@idempotent/http/postgres";
 * import postgres from "postgres";
 * import { accountOf } from "./auth.ts"; // request => the stable account id
 *
 * const store = new PostgresStore({ sql: postgres(Deno.env.get("DATABASE_URL")!) });
 * await store.migrate();
 * setInterval(() => store.sweep().catch(() => {}), 60_000);
 * const handler = () => Response.json({ id: 1 }, { status: 201 });
 * // The scope: the caller's account, resolved after authentication.
 * Deno.serve(idempotency(handler, { store, scope: accountOf }));
 * ```
 */
export class PostgresStore implements IdempotencyStore {
  #sql: PostgresSql;
  #table: string;
  #name: string;
  #statements: Statements;
  #orphans: Orphans;
  #calls: StoreCalls;
  #setup: TransactionSetup;
  #units = new WeakMap<Request, PostgresUnit>();

  /**
   * Makes a store on a postgres.js instance. It connects nothing: run
   * {@linkcode PostgresStore.migrate} (or {@linkcode postgresMigration}'s SQL)
   * once before use.
   *
   * @throws {TypeError} When `sql`, `table` or `transaction.isolation` is
   * invalid, or an option is unknown.
   * @throws {RangeError} When `timeoutMs` or `transaction.statementTimeoutMs` is.
   */
  constructor(options: PostgresStoreOptions) {
    const settings = postgresSettings(options);
    const { sql, table, timeoutMs } = settings;
    this.#sql = sql;
    this.#table = table;
    this.#name = settings.name;
    // A late query is never `query.cancel()`ed (docs/architecture.md, "Nothing left behind").
    ({ calls: this.#calls, orphans: this.#orphans } = serviceCalls({
      service: "PostgreSQL",
      timeoutMs,
      onEvent: settings.onEvent,
      release: (slot, token) => this.release(slot, token),
      failed: (operation, cause) => failure(operation, cause, settings.name),
    }));
    this.#statements = statements(table);
    this.#setup = { ...settings, complete: this.#statements.complete };
  }

  /** The table, quoted as it appears in the store's SQL. */
  get table(): string {
    return this.#table;
  }

  /**
   * Creates what {@linkcode postgresMigration} creates, if absent; safe to
   * run from several instances at once.
   *
   * @throws {Error} The driver's error when the database refuses (no privilege to create a missing schema or the table).
   */
  async migrate(): Promise<void> {
    await migrate(this.#sql, this.#name);
  }

  /**
   * Deletes expired rows, `batchSize` per statement until a batch deletes
   * fewer, and returns how many. Expired rows never block, so sweeping only
   * reclaims space; pg_cron can run the same delete in the database
   * (`DELETE FROM idempotency_keys WHERE expires_at <= now()`).
   *
   * @throws {RangeError} When `batchSize` is not a positive integer.
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

  /** {@linkcode IdempotencyStore.claim} in one statement. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    const token = crypto.randomUUID();
    const params = [slot, fingerprint, token, leaseMs, ttlMs];
    const undo: Undo<Rows> = {
      slot,
      token,
      leaseMs,
      acquired: (rows) => rows[0]?.token === token ? token : undefined,
      mayHaveRun: mayHaveCommitted,
    };
    // No row, or the free row read while the upsert found it taken: another
    // claim committed after this statement's snapshot. Look again.
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const row = (await this.#run("claim", params, undo))[0];
      if (row === undefined || row.free === true) continue;
      return decodeClaim(row, token);
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
    const params = completeParams(slot, token, response);
    return await this.#fenced("complete", params);
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
   * The request's transaction, opened on first call (later calls get the
   * same one): the handler's SQL in it commits with the record or not at all
   * (README, "Exactly once with PostgreSQL"). Pass the request the guarded
   * handler received (in Hono, `c.req.raw`). The claim stays outside,
   * committed at once, its lease renewed on other connections; a throw, an
   * uncacheable response or a lost claim (409) rolls back, and a failed
   * transaction answers 409 or 503 as a fenced release finds it committed or
   * not. Once postgres.js 3.4.9 rejected `begin` for a closed connection,
   * anything sent on it throws uncaught out of a timer: send nothing more.
   *
   * @throws {TypeError} When the request is not one this store's middleware
   * claimed (unguarded, without a key, a replay, or guarded through another
   * store such as a FailoverStore), or `sql` has no `begin`.
   * @throws {RangeError} When the pool (`max`) holds fewer than two
   * connections: the transaction holds one, the renewals need another.
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
  async transaction(request: Request): Promise<TransactionSql> {
    const unit = this.#units.get(request);
    if (unit === undefined) {
      throw new TypeError(
        "No transaction for this request: only a request this PostgresStore's middleware claimed has one (pass the request the handler received; a FailoverStore does not open one)",
      );
    }
    return await unit.open();
  }

  /**
   * Wraps a handler so that it receives the request's transaction
   * ({@linkcode PostgresStore.transaction}) as its second argument. A
   * request no store claimed (without a key, of a method not guarded, run
   * by `failOpen`) gets a plain transaction of its own, the same `tx`:
   * committed when the handler returns, whatever its status, rolled back
   * when it throws. So the same handler serves keyed and keyless requests.
   *
   * @throws {TypeError} On a request another store's middleware claimed
   * (such as a FailoverStore's): its rows could not commit with its record.
   * @throws {RangeError} When the pool (`max`) holds fewer than two
   * connections, as {@linkcode PostgresStore.transaction} would on the first
   * request.
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
    if (typeof handler !== "function") {
      throw new TypeError(
        `'handler' must be a function: current value is ${handler}`,
      );
    }
    assertPool(this.#sql);
    return async (request, ...args) => {
      if (!this.#units.has(request) && !isClaimed(request)) {
        // No key, a method not guarded, failOpen: a transaction of its own.
        const run = (tx: TransactionSql) => handler(request, tx, ...args);
        return await inPlainTransaction(this.#setup, run);
      }
      return await handler(request, await this.transaction(request), ...args);
    };
  }

  /**
   * {@linkcode IdempotencyStore.unitOfWork}: remembers the claimed request
   * for {@linkcode PostgresStore.transaction}.
   */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new PostgresUnit(this.#setup, slot, token);
    this.#units.set(request, unit);
    return unit;
  }

  /**
   * {@linkcode IdempotencyStore.peek}: one `SELECT` (the body's length, not
   * the body), times on the database's clock; `claimedAt` is the row's
   * `created_at`.
   */
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    const response = options?.response === true;
    const rows = await this.#run("peek", [slot, response ? 1 : 0]);
    return decodePeek(rows[0], response);
  }

  /** {@linkcode IdempotencyStore.forget}: `DELETE`s the slot's row. */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    const rows = await this.#run("forget", [slot]);
    return rows[0]?.live === true ? "deleted" : "absent";
  }

  /**
   * {@linkcode IdempotencyStore.stats}: one query counts the live rows
   * (exact; `limit` is not needed), a scan of the table.
   */
  async stats(_options?: { limit?: number }): Promise<StoreStats> {
    const row = (await this.#run("stats", []))[0] ?? {};
    const [inFlight, completed, total] = [
      row.in_flight,
      row.completed,
      row.total,
    ].map((n) => Number(n) || 0) as [number, number, number];
    const unreadable = total - inFlight - completed;
    const sealed = new SealCount();
    const ids: unknown = JSON.parse(String(row.sealed ?? "{}"));
    for (const [id, n] of Object.entries(ids as object)) {
      sealed.addId(id, Number(n) || 0);
    }
    return { inFlight, completed, unreadable, exact: true, ...sealed.counts };
  }

  /** {@linkcode IdempotencyStore.subscribe}: the end of each undo ({@linkcode StoreEvent}). */
  subscribe(listener: (event: StoreEvent) => void): void {
    this.#orphans.subscribe(listener);
  }

  get #prepare(): boolean {
    return this.#sql.options?.prepare ?? true;
  }

  async #fenced(
    operation: "complete" | "release" | "extend",
    parameters: Parameter[],
  ): Promise<WriteOutcome> {
    const rows = await this.#run(operation, parameters);
    return rows.count === 1 ? "applied" : "lost";
  }

  #run(
    operation: Operation,
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

const WRITES = new Set<Operation>(["complete", "release", "extend", "forget"]);

/** A failed call's error, with what to do when the table is missing. */
function failure(
  operation: Operation,
  cause: unknown,
  table: string,
): StoreError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  // undefined_table: the table was never created here.
  const missing = (cause as { code?: unknown } | null)?.code === "42P01"
    ? `: run \`await store.migrate()\` (or postgresMigration()'s SQL) on ${
      JSON.stringify(table)
    } before serving`
    : "";
  return new StoreError(
    `PostgreSQL ${operation} failed${
      WRITES.has(operation) ? " (outcome unknown)" : ""
    }: ${reason}${missing}`,
    { operation, cause },
  );
}
