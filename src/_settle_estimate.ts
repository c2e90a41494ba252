// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The `Retry-After` of a 409, from how long this instance's requests settle.
 *
 * @module
 */

/** The settle time assumed before any was observed: a 409's first `Retry-After` is 1 s. */
const FIRST_SETTLE_MS = 1_000;

/**
 * How long a claimed request takes to settle: RFC 6298's smoothed mean and
 * deviation (gains 1/8, 1/4), read as mean + 4 × deviation; before the first
 * observation, {@linkcode FIRST_SETTLE_MS}.
 */
export class SettleEstimate {
  #mean = -1;
  #deviation = 0;

  /** Adds one duration, in milliseconds. */
  observe(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    if (this.#mean < 0) {
      this.#mean = ms;
      this.#deviation = ms / 2;
      return;
    }
    this.#deviation = 0.75 * this.#deviation + 0.25 * Math.abs(this.#mean - ms);
    this.#mean = 0.875 * this.#mean + 0.125 * ms;
  }

  /**
   * The estimate less what the holder has run, in whole seconds: at least 1,
   * at most the rest of its lease.
   */
  retryAfterSeconds(leaseLeftMs: number, elapsedMs: number): number {
    const settle = this.#mean < 0
      ? FIRST_SETTLE_MS
      : this.#mean + 4 * this.#deviation;
    const expected = settle - elapsedMs;
    return wholeSeconds(Math.min(leaseLeftMs, Math.max(1000, expected)));
  }
}

/** `ms` in whole seconds, rounded up, at least 1. */
export function wholeSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
