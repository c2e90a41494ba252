// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore's one retry: a Deno KV call refused because a local database file
 * is locked by another handle.
 *
 * @module
 */

import { backoff, delay } from "../_async.ts";

/** Attempts of one Deno KV call that SQLite answers "database is locked". */
const LOCKED_ATTEMPTS = 10;

/**
 * Runs a Deno KV call, again after a short random pause while a local
 * database file is locked by another handle (another process, or another
 * `Deno.openKv` of the same path): SQLite refuses such a call before doing
 * anything, so repeating it is safe.
 *
 * @param call The call.
 * @returns What the call resolved to.
 */
export async function unlocked<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (
        attempt >= LOCKED_ATTEMPTS ||
        !String((error as Error)?.message).includes("database is locked")
      ) throw error;
      await delay(backoff(attempt, { first: 2, max: 50, jitter: "full" }));
    }
  }
}
