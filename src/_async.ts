// Copyright 2026 the @idempotent/http authors. MIT license.
/** The time and waiting primitives all of `src/` shares. @module */

/** What `setTimeout` returns: a number on Deno, an object on Node and Bun. */
export type Timer = ReturnType<typeof setTimeout>;

/** A source of time; tests pass a fake one. */
export interface Clock {
  /** The current time, in milliseconds, on a clock that never goes back. */
  now(): number;
  /** Calls `fn` once after `ms`, unref'd; returns its cancel. */
  setTimeout(fn: () => void, ms: number): () => void;
  /** Waits `ms`, or until `signal` aborts (see {@linkcode delay}). */
  delay(ms: number, signal?: AbortSignal | null): Promise<DelayEnd>;
}

/** The process's monotonic clock (`performance.now()`) and its timers. */
export const SYSTEM_CLOCK: Clock = {
  now: () => performance.now(),
  setTimeout(fn, ms) {
    const timer = setTimeout(fn, ms);
    refTimer(timer, false);
    return () => clearTimeout(timer);
  },
  delay: (ms, signal) => delay(ms, signal),
};

const denoTimers = (globalThis as {
  Deno?: { refTimer?(id: number): void; unrefTimer?(id: number): void };
}).Deno;

/** Lets `timer` keep the process alive (`on`), or not, on Deno, Node and Bun. */
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

/** Waits `ms`, or until `signal` aborts; never rejects, leaves nothing behind. */
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

/**
 * What `p` resolves to, or `undefined` once `ms` pass first; the timer is
 * cleared either way.
 */
export async function within<T>(
  p: Promise<T>,
  ms: number,
  clock: Clock = SYSTEM_CLOCK,
): Promise<T | undefined> {
  const end = new AbortController();
  try {
    const elapsed = clock.delay(ms, end.signal).then(() => undefined);
    return await Promise.race([p, elapsed]);
  } finally {
    end.abort();
  }
}

/** How {@linkcode backoff} grows and draws its waits. */
export interface BackoffOptions {
  /** The first wait's ceiling, in milliseconds. */
  first: number;
  /** The most a ceiling grows to, in milliseconds. */
  max: number;
  /** `"full"`: up to the ceiling; `"equal"`: from half of it to it. */
  jitter: "full" | "equal";
  /** Random numbers in [0, 1). @default {Math.random} */
  random?: () => number;
}

/** The wait before retry `attempt` (from 1): `first` doubled each time up to `max`, jittered. */
export function backoff(attempt: number, options: BackoffOptions): number {
  const ceiling = Math.min(options.max, options.first * 2 ** (attempt - 1));
  const r = (options.random ?? Math.random)();
  return options.jitter === "full"
    ? r * ceiling
    : ceiling / 2 + r * ceiling / 2;
}

/** An entry of a {@linkcode List}: its neighbours while it is in one. */
export interface Linked<T> {
  prev: T | undefined;
  next: T | undefined;
}

/**
 * A list through its entries, in insertion order, O(1) with no allocation
 * (docs/architecture.md, Bounded memory).
 */
export class List<T extends Linked<T>> {
  /** The oldest entry. */
  head: T | undefined = undefined;
  #tail: T | undefined = undefined;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds `entry`, in no list, at the end. */
  push(entry: T): void {
    entry.prev = this.#tail;
    entry.next = undefined;
    if (this.#tail === undefined) this.head = entry;
    else this.#tail.next = entry;
    this.#tail = entry;
    this.#size++;
  }

  /** Takes `entry` out; whether it was in. */
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
