// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode MysqlStore}: idempotency records in MySQL 8 or MariaDB 10.6+,
 * on mysql2, beside the application's own data.
 *
 * @module
 */

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
import { isClaimed } from "../_claimed.ts";
import { SealCount } from "../_seal.ts";
import {
  knownOptions,
  optionalFunction,
  positiveInteger,
} from "../_validate.ts";
import type { Orphans } from "./_orphans.ts";
import {
  affectedOf,
  decodeMysqlClaim,
  decodeMysqlPeek,
  DEFAULT_TABLE,
  mayHaveCommitted,
  mysqlCompleteParams,
  type MysqlConnection,
  mysqlMigration,
  type MysqlParameter,
  type MysqlPool,
  type MysqlResult,
  type MysqlRow,
  parseTable,
  rowsOf,
  type Statements,
  statements,
  STRICT_MODE,
  truth,
} from "./_mysql_sql.ts";
import {
  assertPool,
  inPlainTransaction,
  type MysqlTransactionalHandler,
  type MysqlTransactionSetup,
  MysqlUnit,
} from "./_mysql_transaction.ts";
import {
  type Operation,
  serviceCalls,
  type StoreCall,
  type StoreCalls,
  timeoutOption,
  type Undo,
} from "./_store_call.ts";

export type {
  MysqlConnection,
  MysqlParameter,
  MysqlPool,
  MysqlResult,
} from "./_mysql_sql.ts";
export { DEFAULT_TABLE, mysqlMigration } from "./_mysql_sql.ts";
export type { MysqlTransactionalHandler } from "./_mysql_transaction.ts";

/** Options of the {@linkcode MysqlStore} constructor. */
export interface MysqlStoreOptions {
  /**
   * A mysql2/promise pool, `mysql.createPool(url)`, never ended by the store;
   * `FOUND_ROWS` on (mysql2's default) or off, `MULTI_RESULTS` kept.
   */
  pool: MysqlPool;
  /**
   * The table, optionally `database.table`, at most 55 characters (its claim
   * procedure `<table>_claim_v1` is beside it). @default {"idempotency_keys"}
   */
  table?: string;
  /**
   * How long one operation may take, in ms, a pooled connection's wait
   * included (docs/architecture.md, "Store calls and deadlines"); nothing is
   * killed: set `innodb_lock_wait_timeout` for the server. @default {2000}
   */
  timeoutMs?: number;
  /** Receives each {@linkcode StoreEvent} (an undo's end); a throw is ignored. */
  onEvent?: (event: StoreEvent) => void;
}

/** Options of {@linkcode MysqlStore.sweep}. */
export interface MysqlSweepOptions {
  /** How many expired rows one `DELETE` removes. @default {1000} */
  batchSize?: number;
}

const OPTIONS = ["pool", "table", "timeoutMs", "onEvent"];
const CLAIMED_ELSEWHERE =
  "No transaction for this request: another store's middleware claimed it (a FailoverStore opens none), so its rows could not commit with its record";
const CLAIM_ATTEMPTS = 4;

/**
 * An {@linkcode IdempotencyStore} in a MySQL 8 or MariaDB 10.6+ table (InnoDB),
 * through [mysql2](https://github.com/sidorares/node-mysql2), one row per
 * slot. A claim reads the row (a replay or a conflict: no lock, no more); an
 * absent slot takes a plain `INSERT`, a free one a `CALL` of the procedure
 * {@linkcode MysqlStore.migrate} creates; other operations are one statement,
 * on the server's `UTC_TIMESTAMP(6)`. No outcome rests on an affected-rows
 * count `CLIENT_FOUND_ROWS` changes, `INSERT IGNORE` or `GET_LOCK`. Tested on
 * MariaDB 10.11; MySQL 8.0 by its manual only (no MariaDB-only SQL). A claim
 * that failed but may have committed is undone by its token.
 *
 * @example Guard a handler with records in MySQL or MariaDB
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { MysqlStore } from "@idempotent/http/mysql";
 * import mysql from "mysql2/promise";
 * import { accountOf } from "./auth.ts"; // request => the stable account id
 *
 * const pool = mysql.createPool({ uri: Deno.env.get("MYSQL_URL")!, connectionLimit: 10 });
 * const store = new MysqlStore({ pool });
 * await store.migrate();
 * setInterval(() => store.sweep().catch(() => {}), 60_000);
 * const handler = () => Response.json({ id: 1 }, { status: 201 });
 * Deno.serve(idempotency(handler, { store, scope: accountOf }));
 * ```
 */
export class MysqlStore implements IdempotencyStore {
  #pool: MysqlPool;
  #name: string;
  #statements: Statements;
  #orphans: Orphans;
  #calls: StoreCalls;
  #setup: MysqlTransactionSetup;
  #units = new WeakMap<Request, MysqlUnit>();

  /**
   * Makes a store on a mysql2/promise pool. It connects nothing: run
   * {@linkcode MysqlStore.migrate} (or {@linkcode mysqlMigration}'s SQL) once
   * before use.
   *
   * @throws {TypeError} When `pool` or `table` is invalid, or an option is
   * unknown.
   * @throws {RangeError} When `timeoutMs` is not a positive integer of
   * milliseconds or `Infinity`.
   */
  constructor(options: MysqlStoreOptions) {
    if (
      typeof options?.pool?.execute !== "function" ||
      typeof options.pool.getConnection !== "function"
    ) {
      throw new TypeError(
        "'pool' must be a mysql2/promise pool: current value has no execute() or getConnection()",
      );
    }
    knownOptions("MysqlStore", options, OPTIONS);
    const { pool } = options;
    const timeoutMs = timeoutOption(options.timeoutMs, 2000);
    this.#pool = pool;
    this.#name = options.table ?? DEFAULT_TABLE;
    this.#statements = statements(this.#name);
    const name = this.#name;
    ({ calls: this.#calls, orphans: this.#orphans } = serviceCalls({
      service: "MySQL",
      timeoutMs,
      onEvent: optionalFunction("onEvent", options.onEvent),
      release: (slot, token) => this.release(slot, token),
      failed: (operation, cause) => failure(operation, cause, name),
    }));
    this.#setup = { pool, complete: this.#statements.complete };
  }

  /** The table, quoted as it appears in the store's SQL. */
  get table(): string {
    return parseTable(this.#name).quoted;
  }

  /**
   * Creates what {@linkcode mysqlMigration} creates, if absent: the table and
   * the claim procedure, the procedure under a strict `sql_mode`
   * (STRICT_ALL_TABLES), which every call of it keeps. Safe to run from
   * several instances at once.
   *
   * @throws {Error} The driver's error when the database refuses (no
   * privilege to create the table or the procedure).
   */
  async migrate(): Promise<void> {
    const conn = await this.#pool.getConnection();
    try {
      // This session's sql_mode changes: the connection is closed, not reused.
      await conn.query(`SET SESSION sql_mode = '${STRICT_MODE}'`);
      for (const statement of mysqlMigration(this.#name)) {
        // ER_SP_ALREADY_EXISTS: an earlier or concurrent migration made it.
        await conn.query(statement).catch((error) => {
          if (error?.errno !== 1304) throw error;
        });
      }
    } finally {
      conn.destroy();
    }
  }

  /**
   * Deletes expired rows, `batchSize` per statement until a batch deletes
   * fewer, and returns how many. Expired rows never block, so sweeping only
   * reclaims space; an event can run the same delete in the database
   * (`DELETE FROM idempotency_keys WHERE expires_at <= UTC_TIMESTAMP(6)`).
   *
   * @throws {RangeError} When `batchSize` is not a positive integer.
   */
  async sweep(options: MysqlSweepOptions = {}): Promise<number> {
    const batchSize = positiveInteger("batchSize", options.batchSize ?? 1000);
    const text = this.#statements.sweep(batchSize);
    let total = 0;
    while (true) {
      const count = affectedOf(await this.#pool.query(text));
      total += count;
      if (count < batchSize) return total;
    }
  }

  /**
   * {@linkcode IdempotencyStore.claim}: a replay or a conflict in one
   * `SELECT` (no lock); a slot absent in one `INSERT` more, a free one (or
   * one inserted meanwhile) in one `CALL` more.
   */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    const token = crypto.randomUUID();
    const params = [slot, fingerprint, token, leaseMs, ttlMs];
    const undo: Undo<MysqlRow | undefined> = {
      slot,
      token,
      leaseMs,
      acquired: (row) => row?.token === token ? token : undefined,
      mayHaveRun: mayHaveCommitted,
    };
    const { read, insert, claim } = this.#statements;
    const pool = this.#pool;
    // A replay or a conflict: the row read, one SELECT. Absent: a plain
    // INSERT (it inserts or fails ER_DUP_ENTRY, whatever the flags). Free,
    // or inserted meanwhile: the procedure decides. One deadline for all.
    const work = async (call: StoreCall): Promise<MysqlRow | undefined> => {
      const seen = rowsOf(await pool.execute(read, [slot]))[0];
      if (seen !== undefined && !truth(seen.free)) return seen;
      call.throwIfExpired();
      if (seen === undefined) {
        // ER_DUP_ENTRY: another claim inserted it meanwhile.
        const won = await pool.execute(insert, params).then(() => true, (e) => {
          if (e?.errno !== 1062) throw e;
        });
        if (won) return { token, takeovers: 0 };
        call.throwIfExpired();
      }
      return rowsOf(await pool.execute(claim, params))[0];
    };
    // No row, or a free row read back: another claim or a release changed
    // the row between the procedure's upsert and its read. Look again.
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const row = await this.#calls.run("claim", work, undo);
      const changed = truth(row?.free) && row?.token !== token;
      if (row !== undefined && !changed) return decodeMysqlClaim(row, token);
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
    const params = mysqlCompleteParams(slot, token, response);
    return fenced(await this.#run("complete", params));
  }

  /** {@linkcode IdempotencyStore.release} in one fenced `DELETE`. */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    return fenced(await this.#run("release", [slot, String(token)]));
  }

  /** {@linkcode IdempotencyStore.extend} from the database's now, fenced. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    leaseMs = durationMs("leaseMs", leaseMs);
    const params = [leaseMs, leaseMs, leaseMs, slot, String(token)];
    return fenced(await this.#run("extend", params));
  }

  /**
   * Wraps a handler so that it receives a connection in a READ COMMITTED
   * transaction: on a request this store's middleware claimed, its SQL commits
   * with the record (written on it, fenced, then `COMMIT`) or not at all (a
   * throw, an uncacheable response, a lost claim: 409). The claim is outside,
   * its lease renewed on other connections. A request no store claimed gets a
   * plain transaction: committed on return, rolled back on a throw. The store
   * releases the connection.
   *
   * @throws {TypeError} When `handler` is not a function; from the wrapper,
   * on a request another store's middleware claimed (a FailoverStore's).
   * @throws {RangeError} When the pool (`connectionLimit`) holds fewer than
   * two connections: the transaction holds one, the renewals need another.
   *
   * @example An order and its record in one transaction
   * ```ts ignore
   * const store = new MysqlStore({ pool });
   * Deno.serve(idempotency(store.transactional(async (req, tx) => {
   *   await tx.execute("INSERT INTO orders (item) VALUES (?)", ["book"]);
   *   return Response.json({ ok: true }, { status: 201 });
   * }), { store, scope: accountOf }));
   * ```
   */
  transactional<A extends unknown[]>(
    handler: MysqlTransactionalHandler<A>,
  ): (request: Request, ...args: A) => Promise<Response> {
    if (typeof handler !== "function") {
      throw new TypeError(
        `'handler' must be a function: current value is ${handler}`,
      );
    }
    assertPool(this.#pool);
    return async (request, ...args) => {
      const unit = this.#units.get(request);
      if (unit !== undefined) {
        return await handler(request, await unit.open(), ...args);
      }
      // Another store's claim: its rows could not commit with its record.
      if (isClaimed(request)) throw new TypeError(CLAIMED_ELSEWHERE);
      const run = (tx: MysqlConnection) => handler(request, tx, ...args);
      return await inPlainTransaction(this.#setup, run);
    };
  }

  /**
   * {@linkcode IdempotencyStore.unitOfWork}: remembers the claimed request
   * for {@linkcode MysqlStore.transactional}.
   */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new MysqlUnit(this.#setup, slot, token);
    this.#units.set(request, unit);
    return unit;
  }

  /** {@linkcode IdempotencyStore.subscribe}: the end of each undo ({@linkcode StoreEvent}). */
  subscribe(listener: (event: StoreEvent) => void): void {
    this.#orphans.subscribe(listener);
  }

  /**
   * {@linkcode IdempotencyStore.peek}: one `SELECT` (the body's length, not
   * the body), times on the database's clock; `claimedAt` is the row's
   * `created_at`.
   */
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    const response = options?.response === true;
    const rows = rowsOf(await this.#run("peek", [response ? 1 : 0, slot]));
    return decodeMysqlPeek(rows[0], response);
  }

  /**
   * {@linkcode IdempotencyStore.forget}: `DELETE`s the slot's live row; an
   * expired one is absent already, left to {@linkcode MysqlStore.sweep}.
   */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    const rows = affectedOf(await this.#run("forget", [slot]));
    return rows === 1 ? "deleted" : "absent";
  }

  /**
   * {@linkcode IdempotencyStore.stats}: one query counts the live rows
   * (exact; `limit` is not needed), a scan of the table.
   */
  async stats(_options?: { limit?: number }): Promise<StoreStats> {
    const row = rowsOf(await this.#run("stats", []))[0] ?? {};
    const count = (name: string) => Number(row[name]) || 0;
    const [inFlight, completed] = [count("in_flight"), count("completed")];
    const unreadable = count("total") - inFlight - completed;
    const sealed = new SealCount(); // MySQL 8 parses JSON; MariaDB's is text
    const ids = typeof row.sealed === "string"
      ? JSON.parse(row.sealed)
      : row.sealed;
    for (const [id, n] of Object.entries(ids ?? {})) {
      sealed.addId(id, Number(n));
    }
    return { inFlight, completed, unreadable, exact: true, ...sealed.counts };
  }

  #run(
    operation: Exclude<keyof Statements, "sweep">,
    parameters: MysqlParameter[],
    undo?: Undo<MysqlResult>,
  ): Promise<MysqlResult> {
    const text = this.#statements[operation];
    return this.#calls.run(
      operation as Operation,
      () => this.#pool.execute(text, parameters) as Promise<MysqlResult>,
      undo,
    );
  }
}

const WRITES = new Set<Operation>(["complete", "release", "extend", "forget"]);
const fenced = (result: MysqlResult): WriteOutcome =>
  affectedOf(result) === 1 ? "applied" : "lost";

/** A failed call's error, with what to do when the table is missing. */
function failure(operation: Operation, cause: unknown, table: string) {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const errno = (cause as { errno?: unknown } | null)?.errno;
  // ER_NO_SUCH_TABLE, ER_SP_DOES_NOT_EXIST: never migrated here.
  const fix = errno === 1146 || errno === 1305
    ? `: run \`await store.migrate()\` (or mysqlMigration()'s SQL) on ${
      JSON.stringify(table)
    } before serving`
    : "";
  const unknown = WRITES.has(operation) ? " (outcome unknown)" : "";
  const message = `MySQL ${operation} failed${unknown}: ${reason}${fix}`;
  return new StoreError(message, { operation, cause });
}
