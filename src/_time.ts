// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Time for the stores: a clock interface, timers that do not keep a process
 * alive, and {@linkcode Deadlines}, the one way every store bounds how long
 * it waits for its service.
 *
 * @module
 */

/** A source of the current time, in milliseconds. */
export interface Clock {
  /** The current time, in milliseconds. */
  now(): number;
}

/** The process's monotonic clock (`performance.now()`): what deadlines run on. */
export const MONOTONIC: Clock = { now: () => performance.now() };

/** What `setTimeout` returns: a number on Deno, an object on Node and Bun. */
export type Timer = ReturnType<typeof setTimeout>;

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

/**
 * What a {@linkcode Deadlines} does with the operations it watches, given
 * the context each was started with. One handler serves every operation of
 * a store, so that an operation allocates nothing for it.
 */
export interface DeadlineHandler<C> {
  /**
   * The work settled in time with `value`: returns what the caller gets
   * (`value` itself, or what the store reads from it, which spares the store
   * a promise and a turn of its own).
   */
  resolved(context: C, value: unknown): unknown;
  /** The work failed in time: returns the error the caller gets. */
  failed(context: C, error: unknown): unknown;
  /**
   * The work failed in time: returns new work to wait for instead, under the
   * same deadline, or `undefined` to fail. Optional.
   */
  retry?(context: C, error: unknown): PromiseLike<unknown> | undefined;
  /**
   * The work settled in time with `value`: returns more work to wait for,
   * under the same deadline (its value is what the caller gets), or
   * `undefined` to settle with `value`. Optional: an operation of two steps
   * (the second only when the first says so) needs no promise of its own.
   */
  next?(context: C, value: unknown): PromiseLike<unknown> | undefined;
  /** The deadline passed first: returns the error the caller gets. */
  expired(context: C): unknown;
  /** The work settled after its deadline had passed (`failed`: it threw). */
  late(context: C, value: unknown, failed: boolean): void;
}

class Watched<C> {
  expired = false;
  /** Neighbours in the pending list, in start order; unset once out of it. */
  prev: Watched<C> | undefined = undefined;
  next: Watched<C> | undefined = undefined;
  constructor(
    readonly at: number,
    readonly context: C,
    readonly resolve: (value: never) => void,
    readonly reject: (error: unknown) => void,
  ) {}
}

/**
 * Bounds how long a store waits for its service: every operation gets the
 * same `ms`, measured on a monotonic clock, and one timer per store watches
 * them all (one timer per operation costs ~10 µs of latency each, measured
 * on RedisStore). Since every operation waits equally long, the oldest one
 * pending has the nearest deadline: the timer is armed for it, and it
 * re-arms itself for the next when it fires. It keeps the process alive
 * while operations are pending and not when none are; it then fires at most
 * once more and stops.
 *
 * A deadline only stops the waiting: the work itself goes on (nothing here
 * can cancel a command a driver sent), and what it settles with after its
 * deadline goes to {@linkcode DeadlineHandler.late}, so that a store can
 * undo a claim that lands after its caller got an error.
 *
 * With `ms` of `Infinity` nothing is watched: the work is waited for as long
 * as it takes.
 */
export class Deadlines<C> {
  readonly #ms: number;
  readonly #handler: DeadlineHandler<C>;
  readonly #clock: Clock;
  // The operations pending, in start order, which is deadline order: a list
  // through the entries themselves, each unlinked (both ways) as it leaves.
  // A Set churned at this rate left its dead tables chained to the live one,
  // and a dead table promoted to old space kept every later table and the
  // operations in them alive until the next full GC.
  #head: Watched<C> | undefined = undefined;
  #tail: Watched<C> | undefined = undefined;
  #timer: Timer | undefined;

  /**
   * @param ms How long each operation may take, in milliseconds.
   * @param handler What to do as operations settle or expire.
   * @param clock The monotonic clock deadlines are measured on.
   */
  constructor(ms: number, handler: DeadlineHandler<C>, clock = MONOTONIC) {
    this.#ms = ms;
    this.#handler = handler;
    this.#clock = clock;
  }

  /** How long each operation may take, in milliseconds. */
  get ms(): number {
    return this.#ms;
  }

  /**
   * Starts `work` and waits for it until the deadline: resolves with its
   * value, or rejects with what the handler makes of its failure or of the
   * deadline passing. A `work` that throws at once fails in time.
   *
   * @param work Starts the operation, given `context` (a function the store
   * made once, so that an operation allocates no closure for it).
   * @param context What `work` and the handler get.
   * @returns The work's value.
   */
  withDeadline<T>(
    work: (context: C) => PromiseLike<T>,
    context: C,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const watched = new Watched<C>(
        this.#clock.now() + this.#ms,
        context,
        resolve as (value: never) => void,
        reject,
      );
      if (this.#ms !== Infinity) this.#watch(watched);
      let pending: PromiseLike<T>;
      try {
        pending = work(context);
      } catch (error) {
        this.#settle(watched, error, true);
        return;
      }
      this.#await(watched, pending);
    });
  }

  #await(watched: Watched<C>, pending: PromiseLike<unknown>): void {
    pending.then(
      (value) => this.#settle(watched, value, false),
      (error) => this.#settle(watched, error, true),
    );
  }

  #watch(watched: Watched<C>): void {
    const tail = this.#tail;
    this.#tail = watched;
    if (tail !== undefined) {
      tail.next = watched;
      watched.prev = tail;
      return;
    }
    this.#head = watched;
    if (this.#timer === undefined) {
      this.#timer = setTimeout(this.#fire, this.#ms);
    } else {
      refTimer(this.#timer, true);
    }
  }

  /** Takes `watched` out of the pending list: whether it was in it. */
  #unlink(watched: Watched<C>): boolean {
    const { prev, next } = watched;
    if (prev === undefined && this.#head !== watched) return false;
    if (prev === undefined) this.#head = next;
    else prev.next = next;
    if (next === undefined) this.#tail = prev;
    else next.prev = prev;
    watched.prev = watched.next = undefined;
    return true;
  }

  #settle(watched: Watched<C>, value: unknown, failed: boolean): void {
    if (watched.expired) {
      this.#handler.late(watched.context, value, failed);
      return;
    }
    const more = failed
      ? this.#handler.retry?.(watched.context, value)
      : this.#handler.next?.(watched.context, value);
    if (more !== undefined) {
      this.#await(watched, more);
      return;
    }
    if (this.#unlink(watched) && this.#head === undefined) {
      refTimer(this.#timer!, false);
    }
    if (failed) {
      watched.reject(this.#handler.failed(watched.context, value));
    } else {
      watched.resolve(
        this.#handler.resolved(watched.context, value) as never,
      );
    }
  }

  #fire = (): void => {
    this.#timer = undefined;
    const now = this.#clock.now();
    for (
      let watched = this.#head;
      watched !== undefined;
      watched = this.#head
    ) {
      if (watched.at > now) {
        this.#timer = setTimeout(this.#fire, watched.at - now);
        return;
      }
      this.#unlink(watched);
      watched.expired = true;
      watched.reject(this.#handler.expired(watched.context));
    }
  };
}
