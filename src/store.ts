// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's contract with a store (docs/architecture.md, Store
 * contract), for a store's author: {@linkcode IdempotencyStore}, its results,
 * {@linkcode StoreError} and {@linkcode assertSlot}; `@idempotent/http/testing`
 * checks a store against it.
 *
 * @example A store that delegates to another
 * ```ts
 * import { MemoryStore } from "@idempotent/http";
 * import type { ClaimOptions, IdempotencyStore } from "@idempotent/http/store";
 *
 * const inner = new MemoryStore();
 * const store: IdempotencyStore = {
 *   claim: (slot: string, options: ClaimOptions) => inner.claim(slot, options),
 *   complete: (slot, token, response) => inner.complete(slot, token, response),
 *   release: (slot, token) => inner.release(slot, token),
 *   extend: (slot, token, leaseMs) => inner.extend(slot, token, leaseMs),
 * };
 * const claim = await store.claim("s", { fingerprint: "f", leaseMs: 1000, ttlMs: 60_000 });
 * if (claim.state !== "acquired") throw new Error(claim.state);
 * ```
 *
 * @module
 */

/** A response as a store keeps it, to be replayed to every retry. */
export interface StoredResponse {
  /** The handler's status code, 200 to 599. */
  status: number;
  /** Lower-case `[name, value]` pairs in order; each `set-cookie` its own. */
  headers: [name: string, value: string][];
  /** The body bytes, or `null` when it was omitted. */
  body: Uint8Array | null;
  /** Why the body is `null`: set exactly when `body` is `null`. */
  omitted?: OmittedReason;
}

/**
 * Why a record holds no body: over `maxResponseBytes`, not ended within a
 * lease of its first byte, its stream errored, or it was cancelled (each the
 * middleware's decision); or `store_dropped`, the store dropped a body it had
 * been given (MemoryStore under `maxBytes`), which a seal does not cover.
 */
export type OmittedReason =
  | "too_large"
  | "too_slow"
  | "stream_error"
  | "cancelled"
  | "store_dropped";

/** What {@linkcode IdempotencyStore.claim} asks for. */
export interface ClaimOptions {
  /** Stored with the claim, compared by the caller. */
  fingerprint: string;
  /** How long the claim is owned before another request may take it over. */
  leaseMs: number;
  /** How long the record lives, counted from this first claim. */
  ttlMs: number;
}

/**
 * What a claim found: `acquired` (`recovered`: an expired lease taken over),
 * `in_flight` (`fingerprint` `null` when unreadable; `retryAfterMs` ≥ 1, the
 * lease left) or `completed`.
 */
export type ClaimResult =
  | { state: "acquired"; token: string; recovered: boolean }
  | { state: "in_flight"; fingerprint: string | null; retryAfterMs: number }
  | { state: "completed"; fingerprint: string; response: StoredResponse };

/** A fenced write's outcome (`lost`: the token no longer owns the slot); else a {@linkcode StoreError}. */
export type WriteOutcome = "applied" | "lost";

/**
 * A place to keep idempotency records: four operations, each one atomic round
 * trip, fenced by the claim's token; `storeConformance` checks the contract.
 */
export interface IdempotencyStore {
  /** Reserves `slot` if it is free (absent or expired), or reports what holds it. */
  claim(slot: string, options: ClaimOptions): Promise<ClaimResult>;
  /** Records `response` as the slot's answer, if `token` still owns it. */
  complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome>;
  /** Frees the slot, if `token` still owns it, so that the next request runs. */
  release(slot: string, token: string): Promise<WriteOutcome>;
  /** Renews the lease to `leaseMs` from now, if `token` still owns the slot. */
  extend(slot: string, token: string, leaseMs: number): Promise<WriteOutcome>;
  /** Optional: the claimed request's {@linkcode UnitOfWork}, made before the handler runs. */
  unitOfWork?(request: Request, slot: string, token: string): UnitOfWork;
  /**
   * Optional: resolves when the slot may have changed since a claim found it
   * in flight, or when `signal` aborts: early is fine, late is not; a throw
   * falls back to polling.
   */
  waitForChange?(slot: string, signal: AbortSignal): Promise<void>;
  /**
   * Optional (every store here has it): what holds `slot`, read only; it
   * never extends, claims or repairs anything (docs/architecture.md, Inspect
   * and forget). With `response: true`, a completed record comes with the
   * whole record as a claim would read it (`inspectKey` opens a sealed one).
   */
  peek?(slot: string, options?: PeekOptions): Promise<PeekResult>;
  /**
   * Optional (every store here has it): deletes whatever holds `slot`, in
   * flight or completed, unfenced: an admin's act, never the middleware's.
   */
  forget?(slot: string): Promise<ForgetResult>;
  /**
   * Optional: counts of records by state, where the store can count cheaply;
   * a store that scans stops after `limit` keys and says so (`exact: false`).
   */
  stats?(options?: { limit?: number }): Promise<StoreStats>;
  /**
   * Optional: adds `listener` for what the store reports of itself, beside
   * its own `onEvent` option (a function already added, or given as that
   * option, is not added twice). `idempotency()` adds its log (the `logger`
   * option) and `/otel`'s store wrapper its counters, so that neither needs
   * wiring (docs/architecture.md, Loud by default). A FailoverStore adds it
   * to its two stores too. A listener's throw is ignored.
   */
  subscribe?(listener: (event: StoreReport) => void): void;
}

/** What {@linkcode IdempotencyStore.peek} is asked for. */
export interface PeekOptions {
  /**
   * Whether a completed record comes with `response`, the record itself.
   * @default {false}
   */
  response?: boolean;
}

/**
 * What {@linkcode IdempotencyStore.peek} found, times in epoch milliseconds on
 * the store's clock (`null` where the store does not keep one): `absent`
 * (never claimed or expired), `unreadable` (a value no store of ours wrote:
 * the middleware treats it as in flight), `in_flight` or `completed`.
 */
export type PeekResult =
  | { state: "absent" }
  | { state: "unreadable"; expiresAt: number | null }
  | {
    state: "in_flight";
    fingerprint: string;
    claimedAt: number | null;
    /** When another claim may take it over (past: it may now), at most `expiresAt`. */
    leaseExpiresAt: number;
    expiresAt: number;
  }
  | {
    state: "completed";
    fingerprint: string;
    status: number;
    /** The stored header names, in order (a sealed record: its seal's). */
    headerNames: string[];
    /** The stored body's length in bytes, `null` when omitted. */
    bodyBytes: number | null;
    omitted?: OmittedReason;
    claimedAt: number | null;
    expiresAt: number;
    /** The record, when asked for (`{ response: true }`). */
    response?: StoredResponse;
  };

/** What {@linkcode IdempotencyStore.forget} did: `deleted` a value, or found it `absent`. */
export type ForgetResult = "deleted" | "absent";

/** Counts of records by state, from {@linkcode IdempotencyStore.stats}. */
export interface StoreStats {
  /** Records claimed and not yet completed. */
  inFlight: number;
  /** Records holding a response. */
  completed: number;
  /** Values no store of ours wrote. */
  unreadable: number;
  /** `false` when a scan stopped at its limit: the counts are a lower bound. */
  exact: boolean;
  /**
   * Of the `completed`, those sealed (the `encryption` option), by the key id
   * their seal names (read, not opened); every store here counts them.
   */
  sealed?: Record<string, number>;
}

/**
 * What a Redis, PostgreSQL or KV store reports to its `onEvent` (none changes
 * an answer): the undo of a late claim (docs/architecture.md, Nothing left
 * behind) `applied`, found `lost` (taken over or gone), or `dropped` (its
 * lease passed or the queue was full before a release answered).
 */
export type StoreEvent = {
  type: "undo";
  slot: string;
  outcome: WriteOutcome | "dropped";
};

/** One of the two stores of a `FailoverStore`. */
export type FailoverRole = "primary" | "fallback";

/**
 * What a `FailoverStore` reports (none changes an answer): `fallback` (the
 * primary threw on a claim, served by the fallback alone), `recovered` (the
 * fallback's completed record answers; `copied` into the primary or not),
 * `fallback_unavailable` (the primary missed, the fallback threw: `refused`),
 * `write_failed` (one store threw; the other's answer stands), `diverged` (a
 * write was applied by one store and lost by the other).
 */
export type FailoverEvent =
  | { type: "fallback"; operation: "claim"; slot: string; error: unknown }
  | { type: "recovered"; slot: string; copied: boolean }
  | {
    type: "fallback_unavailable";
    operation: "claim";
    slot: string;
    error: unknown;
    /** The claim was refused (503): the fallback never answered, or `strict`. */
    refused?: true;
  }
  | {
    type: "write_failed";
    operation: StoreOperation;
    store: FailoverRole;
    slot: string;
    error: unknown;
  }
  | {
    type: "diverged";
    operation: Exclude<StoreOperation, "claim">;
    slot: string;
    primary: WriteOutcome;
    fallback: WriteOutcome;
  };

/**
 * What {@linkcode IdempotencyStore.subscribe} hands its listeners: a store's
 * {@linkcode StoreEvent}, or a `FailoverStore`'s {@linkcode FailoverEvent}.
 */
export type StoreReport = StoreEvent | FailoverEvent;

/** One claimed request's transaction: the handler opens it or not; the middleware ends it once. */
export interface UnitOfWork {
  /** Whether the handler opened the transaction. */
  readonly opened: boolean;
  /**
   * Writes the record in the transaction, fenced by the token, and commits:
   * `lost` rolled everything back; a throw may or may not have committed.
   */
  commit(record: StoredResponse): Promise<"committed" | "lost">;
  /** Rolls the transaction back (if it was opened); never throws. */
  rollback(): Promise<void>;
}

/** Which store operation failed. */
export type StoreOperation = "claim" | "complete" | "release" | "extend";

/** Which admin operation failed: never the middleware's (docs/architecture.md, Inspect and forget). */
export type AdminOperation = "peek" | "forget" | "stats";

/** Options of the {@linkcode StoreError} constructor. */
export interface StoreErrorOptions {
  /** The store operation that failed. */
  operation: StoreOperation | AdminOperation;
  /** The underlying error. */
  cause?: unknown;
}

/**
 * A store could not be reached, or did not answer in time: for a write, the
 * outcome is unknown.
 */
export class StoreError extends Error {
  /** The store operation that failed. */
  readonly operation: StoreOperation | AdminOperation;

  /** Makes a store error. */
  constructor(message: string, options: StoreErrorOptions) {
    super(message, { cause: options.cause });
    this.name = "StoreError";
    this.operation = options.operation;
  }
}

const MAX_SLOT_BYTES = 256;

/** Throws a `TypeError` unless `slot` is a non-empty string of at most 256 bytes (UTF-8). */
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
