// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The time and waiting primitives every part of the library shares: one
 * clock, one way to let a timer not hold the process, one delay, one
 * backoff and one intrusive list. Nothing else in `src/` writes its own.
 *
 * @module
 */

/** What `setTimeout` returns: a number on Deno, an object on Node and Bun. */
export type Timer = ReturnType<typeof setTimeout>;

/**
 * A source of time: what deadlines, leases and retries are measured on.
 * Tests pass a fake one to let time pass without waiting.
 */
export interface Clock {
  /** The current time, in milliseconds, on a clock that never goes back. */
  now(): number;
  /**
   * Calls `fn` once after `ms`, without keeping the process alive.
   *
   * @returns A function that cancels the call.
   */
  setTimeout(fn: () => void, ms: number): () => void;
}

/** The process's monotonic clock (`performance.now()`) and its timers. */
export const SYSTEM_CLOCK: Clock = {
  now: () => performance.now(),
  setTimeout(fn, ms) {
    const timer = setTimeout(fn, ms);
    refTimer(timer, false);
    return () => clearTimeout(timer);
  },
};

const denoTimers = (globalThis as {
  Deno?: { refTimer?(id: number): void; unrefTimer?(id: number): void };
}).Deno;

/**
 * Lets `timer` keep the process alive (`on`), or not, on Deno, Node and Bun.
 *
 * @param timer The timer.
 * @param on Whether it keeps the process alive.
 */
export function refTimer(timer: Timer, on: boolean): void {
  if (typeof timer === "number") {
    if (on) denoTimers?.refTimer?.(timer);
    else denoTimers?.unrefTimer?.(timer);
  } else {
    const t = timer as { ref?(): void; unref?(): void };
    if (on) t.ref?.();
    else t.unref?.();
  }
}

/** How a {@linkcode delay} ended. */
export type DelayEnd = "elapsed" | "aborted";

/**
 * Waits `ms` milliseconds, or until `signal` aborts, whichever is first.
 * Never rejects; one timer and at most one abort listener, both removed at
 * the end. The timer keeps the process alive, as the caller waits on it.
 *
 * @param ms How long to wait.
 * @param signal Ends the wait early.
 * @returns How the wait ended.
 */
export function delay(
  ms: number,
  signal?: AbortSignal | null,
): Promise<DelayEnd> {
  if (signal?.aborted) return Promise.resolve("aborted");
  return new Promise<DelayEnd>((resolve) => {
    const end = (how: DelayEnd) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", aborted);
      resolve(how);
    };
    const aborted = () => end("aborted");
    const timer = setTimeout(end, ms, "elapsed");
    signal?.addEventListener("abort", aborted, { once: true });
  });
}

/** How {@linkcode backoff} grows and draws its waits. */
export interface BackoffOptions {
  /** The ceiling of the first wait, in milliseconds. */
  first: number;
  /** The most any ceiling grows to, in milliseconds. */
  max: number;
  /**
   * `"full"`: a wait anywhere up to the ceiling; `"equal"`: between half the
   * ceiling and the ceiling (never shorter than half).
   */
  jitter: "full" | "equal";
  /** Random numbers in [0, 1). @default {Math.random} */
  random?: () => number;
}

/**
 * The wait before retry number `attempt` (1 for the first retry): capped
 * exponential backoff, `first` doubled per attempt up to `max`, jittered.
 *
 * @param attempt Which retry this is, from 1.
 * @param options How the waits grow.
 * @returns The wait, in milliseconds (not rounded).
 */
export function backoff(attempt: number, options: BackoffOptions): number {
  const ceiling = Math.min(options.max, options.first * 2 ** (attempt - 1));
  const r = (options.random ?? Math.random)();
  return options.jitter === "full"
    ? r * ceiling
    : ceiling / 2 + r * ceiling / 2;
}

/** An entry of a {@linkcode List}: its neighbours, set while it is in one. */
export interface Linked<T> {
  /** The entry before, in insertion order. */
  prev: T | undefined;
  /** The entry after, in insertion order. */
  next: T | undefined;
}

/**
 * A list through its entries themselves, in insertion order: adding and
 * removing is O(1) and allocates nothing. Used where entries come and go once
 * per request: a `Set` churned at that rate kept its dead hash tables, and
 * through them the entries, alive until a full GC (see
 * docs/architecture.md, "Bounded memory").
 */
export class List<T extends Linked<T>> {
  /** The oldest entry. */
  head: T | undefined = undefined;
  #tail: T | undefined = undefined;
  #size = 0;

  /** How many entries are in the list. */
  get size(): number {
    return this.#size;
  }

  /**
   * Adds `entry` at the end.
   *
   * @param entry An entry in no list.
   */
  push(entry: T): void {
    entry.prev = this.#tail;
    entry.next = undefined;
    if (this.#tail === undefined) this.head = entry;
    else this.#tail.next = entry;
    this.#tail = entry;
    this.#size++;
  }

  /**
   * Takes `entry` out of the list.
   *
   * @param entry The entry.
   * @returns Whether it was in the list.
   */
  remove(entry: T): boolean {
    const { prev, next } = entry;
    if (prev === undefined && this.head !== entry) return false;
    if (prev === undefined) this.head = next;
    else prev.next = next;
    if (next === undefined) this.#tail = prev;
    else next.prev = prev;
    entry.prev = entry.next = undefined;
    this.#size--;
    return true;
  }
}
