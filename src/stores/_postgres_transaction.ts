// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore's transactions: each claimed request's, which commits the
 * handler's SQL together with the request's record.
 *
 * @module
 */

import type { TransactionSql } from "postgres";
import type { StoredResponse, UnitOfWork } from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { completeParams, type PostgresSql } from "./_postgres_sql.ts";

/** A handler that runs its SQL in the request's transaction. */
export type TransactionalHandler<A extends unknown[]> = (
  request: Request,
  tx: TransactionSql,
  ...args: A
) => Response | Promise<Response>;

/** What a request's transaction needs of its store. */
export interface TransactionSetup {
  sql: PostgresSql;
  /** What follows `BEGIN`. */
  begin: string;
  statementTimeoutMs: number;
  /** The `complete` statement. */
  complete: string;
}

/** The transactions of one store's claimed requests, found by the request. */
export class PostgresTransactions {
  #setup: TransactionSetup;
  #units = new WeakMap<Request, PostgresUnit>();

  /** @param setup What every transaction of the store shares. */
  constructor(setup: TransactionSetup) {
    this.#setup = setup;
  }

  /** Remembers a claimed request: see `PostgresStore.unitOfWork`. */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new PostgresUnit(this.#setup, slot, token);
    this.#units.set(request, unit);
    return unit;
  }

  /** The request's transaction: see `PostgresStore.transaction`. */
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

  /** Hands a handler its transaction: see `PostgresStore.transactional`. */
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
}

/** Thrown inside a transaction to roll it back. */
const ROLLBACK = Symbol("rollback");
/** Thrown inside a transaction whose fenced record write found the claim lost. */
const LOST = Symbol("lost");

/**
 * One claimed request's transaction: opened by the handler, held open until
 * the middleware commits it with the record or rolls it back.
 */
class PostgresUnit implements UnitOfWork {
  #setup: TransactionSetup;
  #slot: string;
  #token: string;
  #tx: Promise<TransactionSql> | undefined;
  /** The `sql.begin` under way: resolves once committed. */
  #done: Promise<unknown> | undefined;
  /** Hands the transaction the middleware's decision: a record, or roll back. */
  #decide: (record: StoredResponse | null) => void = () => {};

  constructor(setup: TransactionSetup, slot: string, token: string) {
    this.#setup = setup;
    this.#slot = slot;
    this.#token = token;
  }

  /** Whether the handler opened the transaction. */
  get opened(): boolean {
    return this.#tx !== undefined;
  }

  /** Opens the transaction, or returns the one already open. */
  open(): Promise<TransactionSql> {
    if (this.#tx !== undefined) return this.#tx;
    const { sql, begin, statementTimeoutMs, complete } = this.#setup;
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
        const params = completeParams(this.#slot, this.#token, record);
        const prepare = sql.options?.prepare ?? true;
        const rows = await tx.unsafe(complete, params, { prepare });
        if (rows.count !== 1) throw LOST;
      });
      this.#done.catch((error) => {
        ended = true;
        reject(error);
      });
    });
    return this.#tx;
  }

  /** Writes the record in the transaction, fenced by the token, and commits. */
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

  /** Rolls the transaction back, if it was opened. */
  async rollback(): Promise<void> {
    this.#decide(null);
    await this.#done?.catch(() => {});
  }
}
