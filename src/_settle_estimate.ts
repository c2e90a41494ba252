// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The `Retry-After` of a 409: when the request that holds the key is likely
 * to have settled, from how long the requests this middleware instance ran
 * took to settle.
 *
 * @module
 */

/**
 * A running estimate of how long a claimed request takes from its handler's
 * start to its slot being settled (completed or released): the smoothed mean
 * and mean deviation of TCP's retransmission timer (RFC 6298, gains 1/8 and
 * 1/4), read as mean + 4 × deviation, a likely upper bound that follows a
 * change within a few observations. Two numbers, no allocation per request.
 */
export class SettleEstimate {
  #mean = -1;
  #deviation = 0;

  /**
   * Adds one observed duration.
   *
   * @param ms How long a request took to settle, in milliseconds.
   */
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
   * The `Retry-After` for a request found in flight, in whole seconds: the
   * estimate minus what the holder has already run, at least 1 s and at most
   * the rest of its lease, rounded up. With nothing observed yet, the rest of
   * the lease.
   *
   * @param leaseLeftMs The rest of the holder's lease, as the store reported it.
   * @param elapsedMs How long the holder has run, when known (0 when not).
   * @returns Seconds, at least 1.
   */
  retryAfterSeconds(leaseLeftMs: number, elapsedMs: number): number {
    let ms = leaseLeftMs;
    if (this.#mean >= 0) {
      const expected = this.#mean + 4 * this.#deviation - elapsedMs;
      ms = Math.min(leaseLeftMs, Math.max(1000, expected));
    }
    return wholeSeconds(ms);
  }
}

/**
 * A `Retry-After` of `ms` milliseconds: whole seconds, rounded up, at least 1.
 *
 * @param ms The wait, in milliseconds.
 * @returns Seconds, at least 1.
 */
export function wholeSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
