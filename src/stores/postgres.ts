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

import { StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  StoreOperation,
  WriteOutcome,
} from "../store.ts";
import { assertSlot, claimOptions, durationMs } from "../store.ts";
import {
  assertStoredResponse,
  byteView,
  decodeHeaders,
  encodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";

import { Orphans } from "./_orphans.ts";
import { type DeadlineHandler, Deadlines } from "../_time.ts";

export * from "./_contract.ts";

/** A row as postgres.js returns it. */
export type PostgresRow = Record<string, unknown>;

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
  /** The instance's parsed options; the store follows its `prepare`. */
  options?: { prepare?: boolean };
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
}

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

/** The table name when none is given. */
export const DEFAULT_TABLE = "idempotency_keys";

const MAX_TABLE_BYTES = 48;
const MAX_SCHEMA_BYTES = 63;

/** The time of the statement, on the database's clock (stable within it). */
const NOW = "statement_timestamp()";
/** How many times a claim statement runs when it keeps meeting concurrent claims. */
const CLAIM_ATTEMPTS = 4;

/**
 * Validates a table name and returns its quoted parts.
 *
 * @param name The table, optionally `schema.table`.
 * @returns The quoted name and the bare table part.
 */
function parseTable(
  name: string,
): { quoted: string; table: string; schema: string | null } {
  if (typeof name !== "string") {
    throw new TypeError(
      `'table' must be a string: current value is ${String(name)}`,
    );
  }
  const parts = name.split(".");
  const encoder = new TextEncoder();
  if (
    parts.length > 2 || parts.some((part) => part.length === 0) ||
    name.includes("\0")
  ) {
    throw new TypeError(
      `'table' must be "table" or "schema.table" with non-empty parts and no NUL: current value is ${
        JSON.stringify(name)
      }`,
    );
  }
  const table = parts.at(-1)!;
  if (encoder.encode(table).byteLength > MAX_TABLE_BYTES) {
    throw new TypeError(
      `'table' must name a table of at most ${MAX_TABLE_BYTES} bytes: current value is ${
        JSON.stringify(name)
      }`,
    );
  }
  if (
    parts.length === 2 &&
    encoder.encode(parts[0]!).byteLength > MAX_SCHEMA_BYTES
  ) {
    throw new TypeError(
      `'table' must name a schema of at most ${MAX_SCHEMA_BYTES} bytes: current value is ${
        JSON.stringify(name)
      }`,
    );
  }
  return {
    quoted: parts.map(quoteIdentifier).join("."),
    table,
    schema: parts.length === 2 ? parts[0]! : null,
  };
}

function quoteIdentifier(part: string): string {
  return `"${part.replaceAll('"', '""')}"`;
}

function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * Creates `schema` when it is absent. Not `CREATE SCHEMA IF NOT EXISTS`:
 * PostgreSQL checks the database's CREATE privilege before it looks for the
 * schema, so that statement fails for a role that may use an existing schema
 * but not create one. The DO body is a plain string literal (no dollar
 * quoting a name could close).
 */
function createSchema(schema: string): string {
  const body = `BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ${
    quoteLiteral(schema)
  }) THEN
    CREATE SCHEMA ${quoteIdentifier(schema)};
  END IF;
END`;
  return `DO ${quoteLiteral(body)};\n`;
}

/**
 * The SQL that creates the store's schema (when the table names one), table
 * and index if they are absent: what {@linkcode PostgresStore.migrate} runs,
 * for teams that run their own migrations. The statements take a
 * transaction-scoped advisory lock first, so concurrent runs queue instead
 * of racing, and silence the "already exists, skipping" notices; run them in
 * one transaction (one simple-protocol query, as `psql -c` sends, is one).
 * The schema is created only when it is missing, so a role without the
 * database's CREATE privilege can still migrate into an existing schema.
 *
 * @param table The table, optionally `schema.table`.
 * @returns The statements, separated by semicolons.
 * @throws {TypeError} When the table name is invalid.
 *
 * @example The migration of a schema-qualified table
 * ```ts
 * import { postgresMigration } from "@idempotent/http/postgres";
 * import assert from "node:assert/strict";
 *
 * const text = postgresMigration("app.idempotency_keys");
 * assert.ok(text.includes('CREATE TABLE IF NOT EXISTS "app"."idempotency_keys"'));
 * ```
 */
export function postgresMigration(table: string = DEFAULT_TABLE): string {
  const { quoted, table: bare, schema } = parseTable(table);
  const index = quoteIdentifier(`${bare}_expires_at_idx`);
  return `SET LOCAL client_min_messages = warning;
SELECT pg_advisory_xact_lock(hashtextextended('@idempotent/http migrate', 0));
${
    schema === null
      ? ""
      : createSchema(schema)
  }CREATE TABLE IF NOT EXISTS ${quoted} (
  slot text PRIMARY KEY,
  version smallint NOT NULL,
  state text NOT NULL,
  fingerprint text,
  token text,
  takeovers integer NOT NULL DEFAULT 0,
  lease_until timestamptz,
  expires_at timestamptz,
  status integer,
  headers jsonb,
  body bytea,
  omitted text,
  created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
  completed_at timestamptz
);
CREATE INDEX IF NOT EXISTS ${index} ON ${quoted} (expires_at);
`;
}

/** The statements of one table, built once per store. */
interface Statements {
  claim: string;
  complete: string;
  release: string;
  extend: string;
  sweep: string;
}

function statements(t: string): Statements {
  // A row is free when its TTL ran out (whatever it holds: the sweeper would
  // delete it), or when it is a readable claim of ours whose lease ran out
  // within its TTL. An unreadable row (unknown version, unknown state, no
  // owner, no deadline) is only ever freed by its own expires_at: NULL
  // comparisons make both tests NULL, and CASE takes NULL as false.
  const expired = `(r.expires_at <= ${NOW})`;
  const leaseOver = `(r.version = ${RECORD_VERSION} AND r.state = 'in_flight'
    AND r.token IS NOT NULL AND r.fingerprint IS NOT NULL
    AND r.expires_at > ${NOW} AND r.lease_until <= ${NOW})`;
  const free = `(${expired} OR ${leaseOver})`;
  const fenced = `slot = $1 AND token = $2 AND version = ${RECORD_VERSION}
    AND state = 'in_flight' AND expires_at > ${NOW}`;
  const retryAfter = (alias: string) =>
    `CASE WHEN isfinite(${alias}.lease_until) THEN LEAST(2147483647, GREATEST(1,
    ceil(extract(epoch FROM ${alias}.lease_until - ${NOW}) * 1000)))::int
  END AS retry_after_ms`;
  const columns = (alias: string) =>
    `${alias}.version, ${alias}.state, ${alias}.fingerprint, ${alias}.token,
  ${alias}.takeovers, ${alias}.status, ${alias}.headers::text AS headers,
  ${alias}.body, ${alias}.omitted, (${alias}.expires_at IS NOT NULL) AS has_deadline,
  ${retryAfter(alias)}`;
  return {
    // One statement: read the row; when it is absent or free, insert a fresh
    // claim or take the free row over (ON CONFLICT … DO UPDATE … WHERE free,
    // judged on the latest committed row); return the row written, else the
    // row read. A replay or a conflict reads and writes nothing, so it takes
    // no row lock and flushes no WAL. `free` on a returned row read, and no
    // row at all, mean another claim won between the snapshot and the
    // upsert: the caller runs the statement again (see claim()).
    claim: `WITH cur AS (
  SELECT ${columns("r")}, COALESCE(${free}, false) AS free
  FROM ${t} AS r WHERE r.slot = $1
), ins AS (
  INSERT INTO ${t} AS r
    (slot, version, state, fingerprint, token, takeovers, lease_until, expires_at, created_at)
  SELECT $1, ${RECORD_VERSION}, 'in_flight', $2, $3, 0,
    ${NOW} + $4::float8 * interval '1 millisecond',
    ${NOW} + $5::float8 * interval '1 millisecond', ${NOW}
  WHERE NOT EXISTS (SELECT 1 FROM cur WHERE NOT cur.free)
  ON CONFLICT (slot) DO UPDATE SET
    version = excluded.version, state = excluded.state,
    fingerprint = excluded.fingerprint, token = excluded.token,
    takeovers = CASE WHEN ${expired} THEN 0 ELSE r.takeovers + 1 END,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    status = NULL, headers = NULL, body = NULL, omitted = NULL,
    created_at = CASE WHEN ${expired} THEN ${NOW} ELSE r.created_at END,
    completed_at = NULL
  WHERE ${free}
  RETURNING ${columns("r")}, false AS free
)
SELECT * FROM ins
UNION ALL
SELECT * FROM cur WHERE NOT EXISTS (SELECT 1 FROM ins)`,
    complete: `UPDATE ${t} SET state = 'completed', status = $3::int,
  headers = $4::text::jsonb, body = $5::bytea, omitted = $6::text,
  lease_until = NULL, completed_at = ${NOW}
WHERE ${fenced}`,
    release: `DELETE FROM ${t} WHERE ${fenced}`,
    extend: `UPDATE ${t}
SET lease_until = ${NOW} + $3::float8 * interval '1 millisecond'
WHERE ${fenced}`,
    sweep: `WITH doomed AS (
  SELECT slot FROM ${t} WHERE expires_at <= ${NOW}
  LIMIT $1::int FOR UPDATE SKIP LOCKED
)
DELETE FROM ${t} AS r USING doomed
WHERE r.slot = doomed.slot AND r.expires_at <= ${NOW}`,
  };
}

/**
 * Reads the row a claim returned.
 *
 * @param row The returned row.
 * @param token The token the claim offered.
 * @returns What the claim found.
 */
function decodeClaim(row: PostgresRow | undefined, token: string): ClaimResult {
  if (row === undefined) return unreadable(1000);
  const retry = typeof row.retry_after_ms === "number"
    ? Math.max(1, row.retry_after_ms)
    : 1000;
  if (row.token === token) {
    return {
      state: "acquired",
      token,
      recovered: typeof row.takeovers === "number" && row.takeovers > 0,
    };
  }
  if (
    row.version !== RECORD_VERSION || typeof row.fingerprint !== "string" ||
    row.has_deadline !== true
  ) return unreadable(retry);
  if (row.state === "in_flight" && typeof row.retry_after_ms === "number") {
    return {
      state: "in_flight",
      fingerprint: row.fingerprint,
      retryAfterMs: retry,
    };
  }
  if (row.state === "completed") {
    const response = toStoredResponse(
      row.status,
      decodeHeaders(row.headers),
      byteView(row.body),
      row.omitted,
    );
    if (response !== null) {
      return { state: "completed", fingerprint: row.fingerprint, response };
    }
  }
  return unreadable(retry);
}

/**
 * Keeps idempotency records in a PostgreSQL table through postgres.js.
 *
 * One row per slot. `claim` is a single `INSERT … ON CONFLICT … DO UPDATE …
 * RETURNING` that reserves a free slot or reads what holds it; `complete`,
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
  #deadlines: Deadlines<Statement>;

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
    this.#deadlines = new Deadlines(
      timeoutMs,
      postgresHandler(this.#orphans, timeoutMs),
    );
    this.#statements = statements(this.#table);
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
   * claim whether or not they are swept; sweeping only reclaims space.
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
    return this.#deadlines.withDeadline(
      this.#start,
      { operation, text, parameters, claim },
    );
  }

  /** Sends a statement. */
  #start = (call: Statement): PostgresQuery =>
    this.#sql.unsafe(call.text, call.parameters, { prepare: this.#prepare });
}

/** One statement under way. */
interface Statement {
  operation: StoreOperation;
  text: string;
  parameters: (string | number | Uint8Array | null)[];
  /** Set on claims, which may commit after a failure and must be undone. */
  claim: { slot: string; token: string; leaseMs: number } | undefined;
}

/** What a PostgresStore does as its statements settle, fail or time out. */
function postgresHandler(
  orphans: Orphans,
  timeoutMs: number,
): DeadlineHandler<Statement> {
  const failure = (operation: StoreOperation, cause: unknown) => {
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new StoreError(
      `PostgreSQL ${operation} failed${
        operation === "claim" ? "" : " (outcome unknown)"
      }: ${reason}`,
      { operation, cause },
    );
  };
  return {
    resolved() {
      orphans.kick(); // PostgreSQL answers: undo what waits for it
    },
    failed({ operation, claim }, cause) {
      if (claim !== undefined && mayHaveCommitted(cause)) {
        orphans.unknown(claim.slot, claim.token, claim.leaseMs);
      }
      return failure(operation, cause);
    },
    expired({ operation, claim }) {
      // Watch what the statement does after all (see late()).
      if (claim !== undefined) {
        orphans.out(claim.slot, claim.token, claim.leaseMs);
      }
      // No `query.cancel()`: a cancel request names a connection, not a
      // statement, and postgres.js pipelines statements on a connection,
      // so it can stop another slot's statement and, as seen under a
      // table lock, hand one statement another's reply. The statement
      // is left to finish; a claim among them is undone in late().
      return failure(
        operation,
        new Error(`No answer within ${timeoutMs} ms`),
      );
    },
    late({ claim }, value, failed) {
      if (claim === undefined) return;
      orphans.settled(
        claim.token,
        failed
          ? mayHaveCommitted(value)
          : (value as PostgresRow[])[0]?.token === claim.token,
      );
    },
  };
}

/**
 * Whether a statement that failed with `error` may have committed: not when
 * the server refused it (a SQLSTATE, such as 57014 for a statement it
 * cancelled: a single statement rolls back whole), nor when no connection
 * could be opened to send it; any other failure (a connection lost while the
 * statement ran) may hide a commit.
 */
function mayHaveCommitted(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return true;
  if (/^[0-9A-Z]{5}$/.test(code)) return false;
  return ![
    "ECONNREFUSED",
    "ENOTFOUND",
    "EHOSTUNREACH",
    "CONNECT_TIMEOUT",
    "CONNECTION_ENDED",
  ]
    .includes(code);
}

/** Whether a migration failed only because an object already exists. */
function isDuplicate(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  // unique_violation on the catalog, duplicate_table, duplicate_object
  return code === "23505" || code === "42P07" || code === "42710";
}
