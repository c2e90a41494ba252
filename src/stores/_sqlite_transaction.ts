// Copyright 2026 the @idempotent/http authors. MIT license.
/** SqliteStore's transactions: one writer per process, a request's SQL committed with its record. @module */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { StoredResponse, UnitOfWork } from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { completeParams } from "./_sql_rows.ts";

/** A handler that runs its SQL on the connection holding the request's transaction. */
export type TransactionalHandler<A extends unknown[]> = (
  request: Request,
  db: DatabaseSync,
  ...args: A
) => Response | Promise<Response>;

/**
 * The process's write turn (docs/architecture.md, "SqliteStore"): a
 * transaction holds it from `BEGIN IMMEDIATE` to its end, across the
 * handler's awaits; the store's other writes wait for it, without blocking
 * the event loop, since the write lock is the transaction's. Turns are
 * handed over first come, first served.
 */
export class WriteTurn {
  #held = false;
  #queue: (() => void)[] = [];

  /** Whether a write may run now, synchronously. */
  get free(): boolean {
    return !this.#held;
  }

  /** Resolves once the turn is this caller's. */
  async take(): Promise<void> {
    if (this.#held) {
      await new Promise<void>((resolve) => this.#queue.push(resolve));
    }
    this.#held = true;
  }

  /** Hands the turn to the next waiter, or frees it. */
  give(): void {
    const next = this.#queue.shift();
    if (next === undefined) this.#held = false;
    else next();
  }
}

/** What a unit needs: the transaction's connection (opened on first use) and the turn. */
export interface TransactionSetup {
  connection(): DatabaseSync;
  turn: WriteTurn;
  complete(db: DatabaseSync): StatementSync;
}

/** Opens `BEGIN IMMEDIATE` on the setup's connection in the process's turn. */
export async function begin(setup: TransactionSetup): Promise<DatabaseSync> {
  await setup.turn.take();
  try {
    const db = setup.connection();
    db.exec("BEGIN IMMEDIATE");
    return db;
  } catch (error) {
    setup.turn.give();
    throw error;
  }
}

/** Ends the transaction `begin` opened: COMMIT, or ROLLBACK when `commit` is false or COMMIT fails. */
export function end(
  setup: TransactionSetup,
  db: DatabaseSync,
  commit: boolean,
): void {
  try {
    db.exec(commit ? "COMMIT" : "ROLLBACK");
  } catch (error) {
    rollback(db);
    throw error;
  } finally {
    setup.turn.give();
  }
}

/** ROLLBACK if a transaction is open (`isTransaction` is Node 22.16+). */
export function rollback(db: DatabaseSync): void {
  try {
    db.exec("ROLLBACK");
  } catch { /* none was open */ }
}

/**
 * Runs a handler of a request no store claimed (keyless, unguarded) in a
 * plain transaction of its own: committed when it returns, rolled back when
 * it throws.
 */
export async function plain<A extends unknown[]>(
  setup: TransactionSetup,
  handler: TransactionalHandler<A>,
  request: Request,
  args: A,
): Promise<Response> {
  const db = await begin(setup);
  let response: Response | undefined;
  try {
    return response = await handler(request, db, ...args);
  } finally {
    end(setup, db, response !== undefined); // a throw: rolled back
  }
}

/** One claimed request's transaction: opened by the handler, ended by the middleware. */
export class SqliteUnit implements UnitOfWork {
  #db: Promise<DatabaseSync> | undefined;
  #ended = false;

  constructor(
    private readonly setup: TransactionSetup,
    private readonly slot: string,
    private readonly token: string,
  ) {}

  get opened(): boolean {
    return this.#db !== undefined;
  }

  /** Opens the transaction, or returns the one already open. */
  open(): Promise<DatabaseSync> {
    if (this.#ended) return Promise.reject(new TypeError("It has ended"));
    return this.#db ??= begin(this.setup);
  }

  /** Writes the record in the transaction, fenced by the token, and commits. */
  async commit(record: StoredResponse): Promise<"committed" | "lost"> {
    assertStoredResponse(record);
    const db = await this.#take();
    if (db === undefined) throw new Error("The transaction was never opened");
    let applied = false;
    try {
      const params = completeParams(this.slot, this.token, record);
      applied = Number(this.setup.complete(db).run(...params).changes) === 1;
    } finally {
      end(this.setup, db, applied); // a throw above: applied is false
    }
    return applied ? "committed" : "lost";
  }

  /** Rolls the transaction back, if it was opened; never throws. */
  async rollback(): Promise<void> {
    const db = await this.#take().catch(() => undefined);
    if (db === undefined) return;
    try {
      end(this.setup, db, false);
    } catch { /* the connection is gone: its transaction with it */ }
  }

  /** The open transaction's connection, once: later calls get `undefined`. */
  async #take(): Promise<DatabaseSync | undefined> {
    if (this.#ended) return undefined;
    this.#ended = true;
    return await this.#db;
  }
}
