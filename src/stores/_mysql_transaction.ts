// Copyright 2026 the @idempotent/http authors. MIT license.
/** MysqlStore's transactions: a request's SQL committed with its record. @module */

import type { StoredResponse, UnitOfWork } from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import {
  affectedOf,
  mysqlCompleteParams,
  type MysqlConnection,
  type MysqlPool,
} from "./_mysql_sql.ts";

/** A handler that runs its SQL on the request's transaction's connection. */
export type MysqlTransactionalHandler<A extends unknown[]> = (
  request: Request,
  tx: MysqlConnection,
  ...args: A
) => Response | Promise<Response>;

/** A transaction's pool and `complete` statement. */
export type MysqlTransactionSetup = { pool: MysqlPool; complete: string };

/**
 * Throws a `RangeError` when the pool (mysql2 `connectionLimit`) holds fewer
 * than two connections: the transaction holds one, the renewals need another.
 */
export function assertPool(pool: MysqlPool): void {
  const limit = pool.pool?.config?.connectionLimit;
  if (limit !== undefined && limit < 2) {
    throw new RangeError(
      `A transaction needs a pool of at least 2 connections (the transaction holds one, the lease renewals need another): pass \`mysql.createPool({ uri, connectionLimit: 2 })\` or more: 'connectionLimit' is ${limit}`,
    );
  }
}

/** A connection of its own with a transaction started on it. */
async function begin(setup: MysqlTransactionSetup): Promise<MysqlConnection> {
  const conn = await setup.pool.getConnection();
  try {
    // READ COMMITTED: no gap locks; the record's fenced UPDATE reads the
    // latest row under any level.
    await conn.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    await conn.query("START TRANSACTION");
    return conn;
  } catch (error) {
    conn.destroy();
    throw error;
  }
}

/** Ends the transaction with `statement`; a connection that fails it is closed. */
async function end(conn: MysqlConnection, statement: string): Promise<void> {
  try {
    await conn.query(statement);
    conn.release();
  } catch (error) {
    conn.destroy(); // its transaction's fate is the server's: never reuse it
    throw error;
  }
}

/**
 * Runs `run` in a transaction of its own, for a request no store claimed:
 * committed when it returns, rolled back when it throws
 * (docs/architecture.md, Transactional handlers).
 */
export async function inPlainTransaction(
  setup: MysqlTransactionSetup,
  run: (tx: MysqlConnection) => Response | Promise<Response>,
): Promise<Response> {
  const conn = await begin(setup);
  let response: Response;
  try {
    response = await run(conn);
  } catch (error) {
    await end(conn, "ROLLBACK").catch(() => {});
    throw error;
  }
  await end(conn, "COMMIT");
  return response;
}

/**
 * One claimed request's transaction: opened by the handler, held open until
 * the middleware commits it with the record or rolls it back.
 */
export class MysqlUnit implements UnitOfWork {
  #setup: MysqlTransactionSetup;
  #slot: string;
  #token: string;
  #conn: Promise<MysqlConnection> | undefined;

  constructor(setup: MysqlTransactionSetup, slot: string, token: string) {
    this.#setup = setup;
    this.#slot = slot;
    this.#token = token;
  }

  get opened(): boolean {
    return this.#conn !== undefined;
  }

  /** Opens the transaction, or returns the one already open. */
  async open(): Promise<MysqlConnection> {
    assertPool(this.#setup.pool);
    this.#conn ??= begin(this.#setup);
    return await this.#conn;
  }

  /**
   * Writes the record on the transaction's connection, fenced by the token,
   * and commits. The state always changes, so the count does not depend on
   * CLIENT_FOUND_ROWS.
   */
  async commit(record: StoredResponse): Promise<"committed" | "lost"> {
    assertStoredResponse(record);
    const conn = await this.open();
    const params = mysqlCompleteParams(this.#slot, this.#token, record);
    const written = await conn.execute(this.#setup.complete, params).then(
      affectedOf,
      async (error) => {
        await end(conn, "ROLLBACK").catch(() => {});
        throw error;
      },
    );
    if (written !== 1) {
      await end(conn, "ROLLBACK");
      return "lost";
    }
    await end(conn, "COMMIT");
    return "committed";
  }

  /** Rolls the transaction back, if it was opened; never throws. */
  async rollback(): Promise<void> {
    const conn = await this.#conn?.catch(() => undefined);
    if (conn !== undefined) await end(conn, "ROLLBACK").catch(() => {});
  }
}
