// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The contract between the middleware and a store: what a store must
 * guarantee, and the shapes it hands back.
 *
 * @module
 */

/**
 * A response as a store keeps it, to be replayed to every retry.
 *
 * @example Build a record by hand
 * ```ts
 * import type { StoredResponse } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const record: StoredResponse = {
 *   status: 201,
 *   headers: [["content-type", "application/json"], ["set-cookie", "a=1"], ["set-cookie", "b=2"]],
 *   body: new TextEncoder().encode('{"id":1}'),
 * };
 * assert.equal(record.headers.length, 3);
 * ```
 */
export interface StoredResponse {
  /** The handler's status code, 200 to 599. */
  status: number;
  /**
   * Every response header, in the order the handler's `Headers` yields them,
   * as lower-case `[name, value]` pairs. Each `set-cookie` is its own pair.
   */
  headers: [name: string, value: string][];
  /** The body bytes, or `null` when the body was omitted (see {@linkcode StoredResponse.omitted}). */
  body: Uint8Array | null;
  /** Why the body is `null`: set exactly when `body` is `null`. */
  omitted?: OmittedReason;
}

/**
 * Why a completed record holds no body.
 *
 * - `too_large`: the body was longer than `maxResponseBytes`.
 * - `stream_error`: the handler's body stream errored after a 2xx.
 * - `too_slow`: the body did not end within a lease of its first byte; it
 *   was streamed to the client as it came.
 * - `cancelled`: the body stream was aborted (an `AbortError`) before it
 *   ended, as when the handler stops because its client left.
 */
export type OmittedReason =
  | "too_large"
  | "too_slow"
  | "stream_error"
  | "cancelled";

/** The reasons a body may be omitted, for validating decoded records. */
export const OMITTED_REASONS: readonly OmittedReason[] = Object.freeze([
  "too_large",
  "too_slow",
  "stream_error",
  "cancelled",
]);

/**
 * What {@linkcode IdempotencyStore.claim} asks for.
 *
 * @example
 * ```ts
 * import type { ClaimOptions } from "@idempotent/http";
 * const options: ClaimOptions = { fingerprint: "ab12", leaseMs: 30_000, ttlMs: 86_400_000 };
 * ```
 */
export interface ClaimOptions {
  /** The request's fingerprint, stored with the claim and compared by the caller. */
  fingerprint: string;
  /** How long the claim is owned before another request may take it over. */
  leaseMs: number;
  /** How long the record lives, counted from this first claim. */
  ttlMs: number;
}

/**
 * What a claim found, in one atomic step.
 *
 * - `acquired`: the caller now owns the slot under `token`. `recovered` is
 *   `true` when an expired lease of an earlier owner was taken over.
 * - `in_flight`: another owner holds a live lease. `fingerprint` is that
 *   owner's, or `null` when the stored value could not be read (poisoned,
 *   truncated, a version this code does not know). `retryAfterMs` is a hint:
 *   the time left on the lease, at least 1.
 * - `completed`: a response was recorded for the slot.
 */
export type ClaimResult =
  | { state: "acquired"; token: string; recovered: boolean }
  | { state: "in_flight"; fingerprint: string | null; retryAfterMs: number }
  | { state: "completed"; fingerprint: string; response: StoredResponse };

/**
 * The outcome of a fenced write: `applied`, or `lost` when the token no
 * longer owns the slot (its lease was taken over, the record expired or was
 * released). A transport failure is neither: it throws a
 * {@linkcode StoreError}, and the write may or may not have happened.
 */
export type WriteOutcome = "applied" | "lost";

/**
 * A place to keep idempotency records: the four operations the middleware
 * needs, each one atomic round trip to the backing service.
 *
 * Every implementation guarantees, and the conformance suite checks:
 *
 * - **Atomic claim.** Reserving a free slot and reading what is there is one
 *   atomic step: of many concurrent claims on one free slot exactly one is
 *   `acquired`.
 * - **Fencing.** `complete`, `release` and `extend` apply only while `token`
 *   owns the slot: no later claim has taken it over and the record's TTL has
 *   not run out. Otherwise they say `lost` and change nothing. (An owner whose
 *   lease ran out but whom nobody took over still owns the slot: its
 *   completion is the answer nobody else has started on.)
 * - **Expired is absent.** A record past its TTL and a claim past its lease
 *   never block a new claim, whether or not anything has deleted them yet.
 *   A claim that takes over an expired lease answers `recovered: true`.
 * - **The first claim's TTL.** A claim that acquires the slot (fresh, or by
 *   taking over an expired lease) sets the record's deadline to `ttlMs` from
 *   now; `complete` and `extend` keep that deadline, they never restart it.
 * - **Unreadable is in flight.** A value the store cannot decode is reported
 *   as `in_flight` with `fingerprint: null`, never thrown, and never taken
 *   over as if the slot were free (until its own expiry, where the store can
 *   read one).
 * - **Transport failures throw {@linkcode StoreError}.** After a thrown
 *   write the outcome is unknown.
 *
 * A slot is an opaque string of at most 256 bytes; the middleware passes a
 * 64-character hex SHA-256.
 *
 * @example A store's life cycle, on the MemoryStore
 * ```ts
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const claim = await store.claim("slot-1", { fingerprint: "f", leaseMs: 1000, ttlMs: 60_000 });
 * assert.equal(claim.state, "acquired");
 * if (claim.state === "acquired") {
 *   const done = await store.complete("slot-1", claim.token, { status: 200, headers: [], body: new Uint8Array([1]) });
 *   assert.equal(done, "applied");
 * }
 * const again = await store.claim("slot-1", { fingerprint: "f", leaseMs: 1000, ttlMs: 60_000 });
 * assert.equal(again.state, "completed");
 * ```
 */
export interface IdempotencyStore {
  /**
   * Reserves `slot` for the caller if it is free (absent or expired), or
   * reports what holds it.
   *
   * @param slot The slot, at most 256 bytes.
   * @param options The fingerprint, lease and TTL of the claim.
   * @returns What the claim found.
   * @throws {StoreError} When the store cannot be reached.
   */
  claim(slot: string, options: ClaimOptions): Promise<ClaimResult>;
  /**
   * Records `response` as the slot's final answer, if `token` still owns it.
   * The record keeps the deadline of the first claim.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param response The response to replay.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {StoreError} When the outcome is unknown.
   */
  complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome>;
  /**
   * Frees the slot, if `token` still owns it, so that the next request runs.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {StoreError} When the outcome is unknown.
   */
  release(slot: string, token: string): Promise<WriteOutcome>;
  /**
   * Renews the lease to `leaseMs` from now, if `token` still owns the slot.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param leaseMs The new lease, from now.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {StoreError} When the outcome is unknown.
   */
  extend(slot: string, token: string, leaseMs: number): Promise<WriteOutcome>;
  /**
   * Optional capability: lets the handler run its own writes in a
   * transaction of the store's database that commits together with the
   * record (see {@linkcode UnitOfWork}). The middleware calls it once per
   * claimed request, before the handler, with the request the handler
   * receives; a store without it (or a handler that opens no transaction)
   * is settled the plain way.
   *
   * @param request The request the handler receives.
   * @param slot The claimed slot.
   * @param token The claim's token.
   * @returns The request's unit of work.
   */
  unitOfWork?(request: Request, slot: string, token: string): UnitOfWork;
  /**
   * Optional. Resolves when the slot may have changed since the caller's
   * last claim found it in flight: at once when it holds no live claim, or
   * at the record's next write (a completion, a release, a renewal, a
   * takeover). It may resolve early (the caller claims again and looks),
   * but should not resolve much later than the change. It resolves when
   * `signal` aborts, and holds nothing after that. The middleware's
   * `waitForInFlight` uses it, when present, for duplicates whose first
   * request runs in another process, and polls the store (with a backoff
   * and a bound) when it is absent; it still claims again at the end of the
   * holder's lease and at least once a second, since a watch cannot see a
   * lease running out. Implement it only when the backing service pushes
   * changes without cost to writers that nobody waits for (Deno KV's
   * `watch()`). Named so that it cannot clash with a store's own `watch`.
   *
   * @param slot The slot.
   * @param signal Ends the watch.
   * @returns When the slot may have changed, or the signal aborted.
   * @throws {Error} When the watch fails (the middleware then polls).
   */
  waitForChange?(slot: string, signal: AbortSignal): Promise<void>;
}

/**
 * One claimed request's transaction, as a store with the
 * {@linkcode IdempotencyStore.unitOfWork} capability offers it. The handler
 * opens it (through the store's own API) or not; the middleware then ends it
 * exactly once, by `commit` or `rollback`.
 *
 * @example A unit of work that was never opened
 * ```ts
 * import type { UnitOfWork } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const unit: UnitOfWork = {
 *   opened: false,
 *   commit: () => Promise.resolve("committed"),
 *   rollback: () => Promise.resolve(),
 * };
 * assert.equal(unit.opened, false); // the middleware settles the plain way
 * ```
 */
export interface UnitOfWork {
  /** Whether the handler opened the transaction; when not, the middleware settles the plain way. */
  readonly opened: boolean;
  /**
   * Writes the record inside the transaction, fenced by the claim's token,
   * and commits.
   *
   * @param record What to store.
   * @returns `committed`, or `lost` when the token no longer owned the slot
   * (then everything was rolled back).
   * @throws {Error} When the transaction failed: it may or may not have
   * committed (the middleware then asks the store with a fenced `release`).
   */
  commit(record: StoredResponse): Promise<"committed" | "lost">;
  /**
   * Rolls the transaction back (if it was opened); never throws.
   *
   * @returns When it has ended.
   */
  rollback(): Promise<void>;
}

/** Which store operation failed. */
export type StoreOperation = "claim" | "complete" | "release" | "extend";

/** Options of the {@linkcode StoreError} constructor. */
export interface StoreErrorOptions {
  /** The store operation that failed. */
  operation: StoreOperation;
  /** The underlying error. */
  cause?: unknown;
}

/**
 * A store could not be reached, or did not answer in time. For a write, the
 * outcome is unknown: it may or may not have been applied.
 *
 * The middleware answers a claim's `StoreError` with 503 (or runs the
 * handler unguarded with `failOpen`), and reports a write's as an event.
 *
 * @example
 * ```ts
 * import { StoreError } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const error = new StoreError("Redis is unreachable", { operation: "claim", cause: new Error("ECONNREFUSED") });
 * assert.equal(error.name, "StoreError");
 * assert.equal(error.operation, "claim");
 * ```
 */
export class StoreError extends Error {
  /** The store operation that failed. */
  readonly operation: StoreOperation;

  /**
   * Makes a store error.
   *
   * @param message What failed, in sentence case.
   * @param options The operation and the cause.
   */
  constructor(message: string, options: StoreErrorOptions) {
    super(message, { cause: options.cause });
    this.name = "StoreError";
    this.operation = options.operation;
  }
}

/** The most bytes a slot may have. */
export const MAX_SLOT_BYTES = 256;

/**
 * Throws a `TypeError` unless `slot` is a non-empty string of at most 256
 * bytes (UTF-8). Stores call it first in every operation.
 *
 * @param slot The slot to check.
 */
export function assertSlot(slot: string): void {
  if (typeof slot !== "string" || slot.length === 0) {
    throw new TypeError(
      `'slot' must be a non-empty string: current value is ${
        JSON.stringify(slot)
      }`,
    );
  }
  // Every UTF-16 unit encodes to at most 3 bytes: only long strings need counting.
  if (
    slot.length * 3 > MAX_SLOT_BYTES &&
    new TextEncoder().encode(slot).byteLength > MAX_SLOT_BYTES
  ) {
    throw new TypeError(
      `'slot' must be at most ${MAX_SLOT_BYTES} bytes: current length is ${slot.length} characters`,
    );
  }
}

/**
 * Checks a lease or TTL and returns it in whole milliseconds: a finite
 * number greater than 0, a fraction counting as the next whole millisecond
 * (1.5 is 2), at most `Number.MAX_SAFE_INTEGER` after rounding. Every store
 * follows this one rule, and keeps whole milliseconds (Redis's `PEXPIRE`
 * takes nothing finer). Stores call it on `claim` and `extend`.
 *
 * @param name The option's name, for the message.
 * @param value The value to check.
 * @returns The value, rounded up to whole milliseconds.
 * @throws {RangeError} When it is not such a number.
 *
 * @example
 * ```ts
 * import { durationMs } from "./store.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(durationMs("leaseMs", 1.5), 2);
 * assert.throws(() => durationMs("leaseMs", 0), RangeError);
 * ```
 */
export function durationMs(name: string, value: unknown): number {
  const ms = typeof value === "number" ? Math.ceil(value) : NaN;
  if (!(ms > 0 && ms <= Number.MAX_SAFE_INTEGER)) {
    throw new RangeError(
      `'${name}' must be a positive number of milliseconds, at most 2^53 - 1: current value is ${
        typeof value === "string" ? JSON.stringify(value) : value
      }`,
    );
  }
  return ms;
}

/**
 * Checks what a claim asks for, as every store does first in `claim`: the
 * fingerprint a string, the lease and TTL as {@linkcode durationMs} says.
 * Returns `options` itself when its durations are whole already, else a copy
 * with them rounded up.
 *
 * @param options The claim's options.
 * @returns The options, with whole-millisecond durations.
 * @throws {TypeError} When the fingerprint is not a string.
 * @throws {RangeError} When `leaseMs` or `ttlMs` is not a positive number.
 *
 * @example
 * ```ts
 * import { claimOptions } from "./store.ts";
 * import assert from "node:assert/strict";
 *
 * const options = { fingerprint: "f", leaseMs: 1.5, ttlMs: 60_000 };
 * assert.deepEqual(claimOptions(options), { fingerprint: "f", leaseMs: 2, ttlMs: 60_000 });
 * assert.throws(() => claimOptions({ ...options, ttlMs: -1 }), RangeError);
 * ```
 */
export function claimOptions(options: ClaimOptions): ClaimOptions {
  const fingerprint = options?.fingerprint;
  if (typeof fingerprint !== "string") {
    throw new TypeError(
      `'fingerprint' must be a string: current value is ${fingerprint}`,
    );
  }
  const leaseMs = durationMs("leaseMs", options.leaseMs);
  const ttlMs = durationMs("ttlMs", options.ttlMs);
  return leaseMs === options.leaseMs && ttlMs === options.ttlMs
    ? options
    : { fingerprint, leaseMs, ttlMs };
}
