// Copyright 2026 the @idempotent/http authors. MIT license.
/** Time in tests: waiting for a state, deferreds, and the fake clock. @module */

import type { Clock, DelayEnd } from "../../src/_async.ts";

/** A promise and its resolver. */
export function deferred<T = void>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
} {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => resolve = r);
  return { promise, resolve };
}

/**
 * Waits `ms` milliseconds. Only for a real clock that must move (a lease or
 * TTL on a server's clock) or for a pause between polls: a test never sleeps
 * in the hope that some work is done by then; it waits for a state with
 * {@linkcode waitFor}.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolves once `check()` holds, looking again every 10 ms. It waits for a
 * state, however long the machine takes to reach it; `ms` is only a bound so
 * that a state never reached fails the test instead of hanging it.
 *
 * @param what What is awaited, for the failure message.
 * @param check What must hold.
 * @param ms When to fail instead of hanging.
 */
export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  ms = 20_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`Gave up waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * {@linkcode waitFor} with the arguments the other way round (check first).
 *
 * @param check What must hold.
 * @param what What is awaited, for the failure message.
 * @param ms When to fail instead of hanging.
 */
export function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 30_000,
): Promise<void> {
  return waitFor(what, check, ms);
}

/**
 * Time that moves only when the test moves it, with timers that fire in
 * order: the middleware's clock (`configure(options, clock)`), and a
 * store's (`clock: () => time.now()`, `elapse: (ms) => time.advance(ms)`).
 */
export class FakeClock implements Clock {
  #now: number;
  #timers = new Set<{ at: number; fn: () => void }>();

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): () => void {
    const timer = { at: this.#now + ms, fn };
    this.#timers.add(timer);
    return () => this.#timers.delete(timer);
  }

  delay(ms: number, signal?: AbortSignal | null): Promise<DelayEnd> {
    if (signal?.aborted) return Promise.resolve("aborted");
    return new Promise<DelayEnd>((resolve) => {
      const end = (how: DelayEnd) => {
        cancel();
        signal?.removeEventListener("abort", aborted);
        resolve(how);
      };
      const aborted = () => end("aborted");
      const cancel = this.setTimeout(() => end("elapsed"), ms);
      signal?.addEventListener("abort", aborted, { once: true });
    });
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Moves to `target`, firing each timer due on the way at its own time, and
   * after each one waits for what `settle` returns (by default, one turn of
   * the event loop, so that what a timer started can answer).
   */
  async advanceTo(
    target: number,
    settle: () => Promise<void> = () => sleep(0),
  ): Promise<void> {
    for (;;) {
      let first: { at: number; fn: () => void } | undefined;
      for (const timer of this.#timers) {
        if (timer.at <= target && (!first || timer.at < first.at)) {
          first = timer;
        }
      }
      if (first === undefined) break;
      this.#timers.delete(first);
      this.#now = first.at;
      first.fn();
      await settle();
    }
    this.#now = target;
  }

  /** {@linkcode FakeClock.advanceTo} `ms` from now. */
  advance(ms: number, settle?: () => Promise<void>): Promise<void> {
    return this.advanceTo(this.#now + ms, settle);
  }
}
