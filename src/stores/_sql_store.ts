// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the SQL stores share beyond their statements: the sweep's batches and
 * the stats row read back. SqliteStore uses it; PostgresStore (and a MySQL
 * store) have the same code and should move onto it. @module
 */

import type { StoreStats } from "../store.ts";
import { SealCount } from "../_seal.ts";

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
  const sealed = new SealCount();
  const ids: unknown = JSON.parse(String(row.sealed ?? "{}"));
  for (const [id, n] of Object.entries(ids as object)) {
    sealed.addId(id, Number(n) || 0);
  }
  const unreadable = total - inFlight - completed;
  return { inFlight, completed, unreadable, exact: true, ...sealed.counts };
}
