// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore's options and their checks.
 *
 * @module
 */

/** Options of the {@linkcode KvStore} constructor. */
export interface KvStoreOptions {
  /**
   * The database, opened by the caller (`Deno.openKv(path)` locally,
   * `Deno.openKv()` on Deno Deploy). The caller closes it: the store never
   * does.
   */
  kv: Deno.Kv;
  /**
   * The key prefix under which every key of the store lives: the record of a
   * slot at `[...prefix, "rec", slot]`, the chunks of a large body at
   * `[...prefix, "chunk", slot, token, set, i]`.
   *
   * @default {["idempotency"]}
   */
  prefix?: Deno.KvKey;
  /**
   * The clock, in milliseconds since the epoch, that leases and deadlines are
   * measured with. Real deployments keep the system clock; tests inject a
   * fake one to let time pass without sleeping. On Deno Deploy every region
   * reads its own system clock, which the store assumes to be synchronized
   * (a skew shortens or lengthens leases and TTLs by as much).
   *
   * @default {Date.now}
   */
  clock?: () => number;
  /**
   * How long one operation may take, in milliseconds, before it throws a
   * {@linkcode StoreError} (for a write, the outcome is unknown). The
   * deadline only stops the waiting: Deno KV has no way to cancel a call,
   * so the operation goes on, and a write may still apply. A claim that
   * acquires the slot after its caller got the error is released again
   * (retried with a backoff, for at most one lease), so it never holds the
   * key. `Infinity` waits for as long as Deno KV takes.
   *
   * @default {10_000}
   */
  timeoutMs?: number;
}

/** A {@linkcode KvStoreOptions}, checked, with its defaults filled in. */
export interface KvSettings {
  kv: Deno.Kv;
  /** A copy of the prefix. */
  prefix: Deno.KvKey;
  clock: () => number;
  timeoutMs: number;
}

/**
 * Checks the options of a {@linkcode KvStore}.
 *
 * @param options The options.
 * @returns The settings.
 * @throws {RangeError} When `timeoutMs` is not a positive number.
 * @throws {TypeError} When `kv`, `prefix` or `clock` is not what it should be.
 */
export function kvSettings(options: KvStoreOptions): KvSettings {
  const { kv, prefix = ["idempotency"], clock = Date.now } = options ?? {};
  const timeoutMs = options?.timeoutMs ?? 10_000;
  if (typeof timeoutMs !== "number" || !(timeoutMs > 0)) {
    throw new RangeError(
      `'timeoutMs' must be a positive number: current value is ${timeoutMs}`,
    );
  }
  if (
    kv === null || typeof kv !== "object" || typeof kv.atomic !== "function"
  ) {
    throw new TypeError("'kv' must be a Deno.Kv: current value is " + kv);
  }
  if (!Array.isArray(prefix)) {
    throw new TypeError(
      `'prefix' must be an array of key parts: current value is ${prefix}`,
    );
  }
  if (typeof clock !== "function") {
    throw new TypeError(
      `'clock' must be a function: current value is ${clock}`,
    );
  }
  return { kv, prefix: [...prefix], clock, timeoutMs };
}
