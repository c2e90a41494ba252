// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the stores share and no app needs: the omitted reasons' list, the peek
 * builders, the claim's checked durations, the SQL stores' sweep and stats,
 * and the failover's rule of what a claim finds (private; the contract itself
 * is `src/store.ts`, the `./store` entry point).
 *
 * @module
 */

import type {
  ClaimOptions,
  OmittedReason,
  PeekResult,
  StoredResponse,
  StoreStats,
} from "../store.ts";

/** The {@linkcode OmittedReason} of a body a store dropped on its own. */
export const STORE_DROPPED = "store_dropped";

/** Every {@linkcode OmittedReason}. */
export const OMITTED_REASONS: readonly OmittedReason[] = Object.freeze([
  "too_large",
  "too_slow",
  "stream_error",
  "cancelled",
  STORE_DROPPED,
]);

/** A record in flight as `peek` reports it: its lease ends with the record at the latest. */
export function inFlightPeek(
  fingerprint: string,
  leaseUntil: number,
  expiresAt: number,
  claimedAt: number | null = null,
): PeekResult {
  const leaseExpiresAt = Math.min(leaseUntil, expiresAt);
  return {
    state: "in_flight",
    fingerprint,
    claimedAt,
    leaseExpiresAt,
    expiresAt,
  };
}

/** A completed record as `peek` reports it: `omitted` kept only without a body. */
export function completedPeek(
  fingerprint: string,
  record: {
    status: number;
    headerNames: string[];
    bodyBytes: number | null;
    omitted?: OmittedReason | undefined;
  },
  expiresAt: number,
  claimedAt: number | null = null,
  response?: StoredResponse,
): PeekResult {
  const { status, headerNames, bodyBytes, omitted } = record;
  const found: PeekResult = {
    state: "completed",
    fingerprint,
    status,
    headerNames,
    bodyBytes,
    claimedAt,
    expiresAt,
  };
  if (bodyBytes === null && omitted !== undefined) found.omitted = omitted;
  if (response !== undefined) found.response = response;
  return found;
}

/** A lease or TTL in whole milliseconds, rounded up (for Redis), else a `RangeError`. */
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

/** A claim's options checked: `options` itself when its durations are whole, else a rounded copy. */
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

// The SQL stores (SqliteStore; PostgresStore has the same code, to move onto this).

/**
 * Runs `batch` (one `DELETE` of at most `size` expired rows, resolving to how
 * many it deleted) until a batch deletes fewer; resolves to the total.
 *
 * @throws {RangeError} When `batchSize` is not a positive integer.
 */
export async function sweepInBatches(
  options: { batchSize?: number },
  batch: (size: number) => number | Promise<number>,
): Promise<number> {
  const size = options.batchSize ?? 1000;
  if (!Number.isInteger(size) || size < 1) {
    throw new RangeError(
      `'batchSize' must be a positive integer: current value is ${size}`,
    );
  }
  let total = 0;
  while (true) {
    const count = await batch(size);
    total += count;
    if (count < size) return total;
  }
}

/**
 * The exact counts of a stats row: `in_flight`, `completed`, `total` (of the
 * live rows; the rest unreadable) and `sealed`, a JSON object of key id to
 * count.
 */
export function statsOf(row: Record<string, unknown>): StoreStats {
  const [inFlight, completed, total] = [row.in_flight, row.completed, row.total]
    .map((n) => Number(n) || 0) as [number, number, number];
  // Own properties whatever the ids (`__proto__` too), as SealCount makes them.
  const ids = Object.entries(JSON.parse(String(row.sealed ?? "{}")));
  const sealed = Object.fromEntries(ids.map(([id, n]) => [id, Number(n) || 0]));
  const unreadable = total - inFlight - completed;
  return { inFlight, completed, unreadable, exact: true, sealed };
}

/**
 * What a claim would find, from each store's record (`null`: that store
 * failed): the primary's when it is completed or the fallback has none, else
 * the fallback's; one store's when the other failed.
 */
export function claimFinds<P extends PeekResult>(
  primary: P | null,
  fallback: P | null,
): P | null {
  if (primary === null || fallback === null) return primary ?? fallback;
  const primaryStands = primary.state === "completed" ||
    (primary.state !== "absent" && fallback.state !== "completed");
  return primaryStands ? primary : fallback;
}

/** A call's value, or its error, so that both stores' calls can be awaited together. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** `call()`'s value or error, never a rejection. */
export async function settle<T>(call: () => Promise<T>): Promise<Settled<T>> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error };
  }
}
