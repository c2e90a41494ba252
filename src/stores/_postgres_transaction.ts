// Copyright 2026 the @idempotent/http authors. MIT license.
/** PostgresStore's transactions: a request's SQL committed with its record. @module */

import type { TransactionSql } from "postgres";
import type { StoredResponse, UnitOfWork } from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import type { PostgresSql } from "./_postgres_sql.ts";
import { completeParams } from "./_sql_rows.ts";

/** A handler that runs its SQL in the request's transaction. */
export type TransactionalHandler<A extends unknown[]> = (
  request: Request,
  tx: TransactionSql,
  ...args: A
) => Response | Promise<Response>;

/** What a request's transaction needs: `begin` follows `BEGIN`. */
export interface TransactionSetup {
  sql: PostgresSql;
  begin: string;
  statementTimeoutMs: number;
  complete: string;
}

/**
 * Throws a `RangeError` when `sql`'s pool (postgres.js `max`) holds fewer
 * than two connections: the transaction holds one, the renewals need another.
 */
export function assertPool(sql: PostgresSql): void {
  const max = sql.options?.max;
  if (max !== undefined && max < 2) {
    throw new RangeError(
      `A transaction needs a pool of at least 2 connections (the transaction holds one, the lease renewals need another): pass \`postgres(url, { max: 2 })\` or more: 'max' is ${max}`,
    );
  }
}

/**
 * Runs `run` in a transaction of its own, for a request no store claimed:
 * committed when it returns, rolled back when it throws
 * (docs/architecture.md, Transactional handlers).
 */
export async function inPlainTransaction(
  setup: TransactionSetup,
  run: (tx: TransactionSql) => Response | Promise<Response>,
): Promise<Response> {
  const { sql, begin, statementTimeoutMs } = setup;
  if (typeof sql.begin !== "function") {
    throw new TypeError(
      "'sql' must be a postgres.js instance: it has no begin()",
    );
  }
  let response: Response | undefined;
  await sql.begin(begin, async (tx) => {
    if (statementTimeoutMs > 0) {
      await tx.unsafe(`SET LOCAL statement_timeout = ${statementTimeoutMs}`);
    }
    response = await run(tx);
  });
  return response!;
}

/** Thrown inside a transaction to roll it back, or because the claim was lost. */
const ROLLBACK = Symbol("rollback");
const LOST = Symbol("lost");

/**
 * One claimed request's transaction: opened by the handler, held open until
 * the middleware commits it with the record or rolls it back.
 */
export class PostgresUnit implements UnitOfWork {
  #setup: TransactionSetup;
  #slot: string;
  #token: string;
  #tx: Promise<TransactionSql> | undefined;
  /** The `sql.begin` under way, resolved once committed. */
  #done: Promise<unknown> | undefined;
  /** Hands the transaction a record to commit, or `null`: roll back. */
  #decide: (record: StoredResponse | null) => void = () => {};

  constructor(setup: TransactionSetup, slot: string, token: string) {
    this.#setup = setup;
    this.#slot = slot;
    this.#token = token;
  }

  get opened(): boolean {
    return this.#tx !== undefined;
  }

  /** Opens the transaction, or returns the one already open. */
  async open(): Promise<TransactionSql> {
    if (this.#tx !== undefined) return await this.#tx;
    const { sql, begin, statementTimeoutMs, complete } = this.#setup;
    if (typeof sql.begin !== "function") {
      throw new TypeError(
        "'sql' must be a postgres.js instance: it has no begin()",
      );
    }
    assertPool(sql);
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
        // Once postgres.js 3.4.9 rejected `begin` for a closed connection,
        // anything sent on it (COMMIT or ROLLBACK too) throws uncaught out of
        // a timer: this callback then never ends, holding only itself.
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
    return await this.#tx;
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
