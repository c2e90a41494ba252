// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Waiting for the request that holds a key instead of answering 409 (see
 * docs/architecture.md, The request's way, step 3), at most `maxWaiting` at
 * once per middleware. A duplicate of a local owner parks until its settle,
 * touching no store; else it polls with backoff ({@linkcode POLL}), a step
 * also ended by the store's `waitForChange()` ({@linkcode WATCHED_POLL}) or
 * just after the holder's lease would run out (a watch cannot see that).
 * @module
 */

import { backoff, type Clock, type DelayEnd, SYSTEM_CLOCK } from "./_async.ts";
import type { Report } from "./events.ts";
import type { ClaimResult } from "./store.ts";

/** A claim, or the store's failure to answer it (the guard's `Claimed`). */
export type Claimed = ClaimResult | { state: "unreachable"; error: unknown };

/** A polling waiter's steps: the first about 10 ms, doubling up to 250 ms. */
const POLL = { first: 10, max: 250, jitter: "equal" } as const;
/** A watching waiter's steps: a safety net for a change the watch missed. */
const WATCHED_POLL = { first: 100, max: 1_000, jitter: "equal" } as const;

/** How a waiter's step ended; `aborted`: the request's signal (its client left). */
type Step = DelayEnd | "woken";

/** A slot's local owners (a takeover makes two) and its parked waiters. */
type SlotState = { owners: number; parked: Set<() => void> };

/** The waiters of one middleware instance. */
export class Waiters {
  #slots = new Map<string, SlotState>();
  #waiting = 0;

  /** A duplicate waits `waitMs` at most, on `clock`; `max` of them may wait at once. */
  constructor(
    readonly waitMs: number,
    readonly max: number,
    readonly clock: Clock = SYSTEM_CLOCK,
  ) {}

  get waiting(): number {
    return this.#waiting;
  }

  /** A request of this instance acquired `slot`: duplicates park on it. */
  owned(slot: string): void {
    const state = this.#slots.get(slot);
    if (state !== undefined) state.owners++;
    else this.#slots.set(slot, { owners: 1, parked: new Set() });
  }

  /** A request of this instance settled `slot`: once none is left, its waiters wake. */
  settled(slot: string): void {
    const state = this.#slots.get(slot);
    if (state === undefined || --state.owners > 0) return;
    this.#slots.delete(slot);
    for (const wake of state.parked) wake();
  }

  /** Whether a request of this instance holds `slot`. */
  isOwned(slot: string): boolean {
    return this.#slots.has(slot);
  }

  /** Takes a waiting place; `false` when `maxWaiting` are taken. */
  enter(): boolean {
    if (this.#waiting >= this.max) return false;
    this.#waiting++;
    return true;
  }

  leave(): void {
    this.#waiting--;
  }

  /** Parks until the slot's local owners settle, `ms` pass, or `signal` aborts. */
  async park(
    slot: string,
    ms: number,
    signal: AbortSignal | null,
  ): Promise<Step> {
    const parked = this.#slots.get(slot)?.parked;
    if (parked === undefined) return "woken";
    let wake!: () => void;
    const woken = new Promise<Step>((resolve) => wake = () => resolve("woken"));
    parked.add(wake);
    try {
      return await pause(this.clock, ms, signal, () => woken);
    } finally {
      parked.delete(wake);
    }
  }
}

/** `clock`'s delay, or until `wake`'s promise, given a signal that stops it. */
async function pause(
  clock: Clock,
  ms: number,
  signal: AbortSignal | null,
  wake: (ended: AbortSignal) => Promise<Step>,
): Promise<Step> {
  const end = new AbortController();
  const aborted = () => end.abort();
  signal?.addEventListener("abort", aborted, { once: true });
  try {
    const elapsed = clock.delay(ms, end.signal); // first, so that an abort wins
    return await Promise.race([elapsed, wake(end.signal)]);
  } finally {
    signal?.removeEventListener("abort", aborted);
    end.abort();
  }
}

/** What one duplicate's wait needs from its guard. */
export interface WaitContext {
  readonly slot: string;
  readonly fingerprint: string;
  readonly started: number; // when the middleware began on the request
  readonly signal: () => AbortSignal | null; // read when the wait begins
  readonly claim: () => Promise<Claimed>; // one store round trip
  readonly watch: ((signal: AbortSignal) => Promise<void>) | undefined;
  readonly report: Report;
}

/**
 * Waits for the holder of the slot that `first` found in flight with the same
 * fingerprint; returns the claim that ends the wait (`acquired`: already
 * marked owned; `in_flight`: 409, its `retryAfterMs` counted from now).
 */
export async function waitForOwner(
  waiters: Waiters,
  context: WaitContext,
  first: ClaimResult & { state: "in_flight" },
): Promise<Claimed> {
  const { slot, started, report } = context;
  if (!waiters.enter()) {
    const waiting = waiters.waiting;
    report(() => ({ type: "wait_refused", slot, waiting }), started);
    return first;
  }
  const { clock } = waiters;
  const begun = clock.now();
  const deadline = begun + waiters.waitMs;
  let reads = 0;
  let step = 0;
  let last: ClaimResult & { state: "in_flight" } = first;
  let lastAt = begun;
  const leaseLeft = () => last.retryAfterMs - (clock.now() - lastAt);
  const signal = context.signal();
  let via: "owner" | "poll" = waiters.isOwned(slot) ? "owner" : "poll";
  let watching = context.watch !== undefined; // until it throws
  let quick = false; // the last watch woke within the first poll's delay
  report(() => ({ type: "waiting", slot, via }), started);
  const ended = (reason: "timed_out" | "gone" | "unreachable") => {
    const waitedMs = clock.now() - begun;
    report(
      () => ({ type: "wait_ended", slot, reason, waitedMs, reads }),
      started,
    );
    return { ...last, retryAfterMs: Math.max(1, leaseLeft()) };
  };
  try {
    for (;;) {
      if (signal?.aborted) return ended("gone");
      const left = deadline - clock.now();
      if (left <= 0) return ended("timed_out");
      let outcome: Step;
      if (waiters.isOwned(slot)) {
        via = "owner";
        outcome = await waiters.park(slot, left, signal);
        // Past the deadline without a settle: a claim would find the same.
        if (outcome === "elapsed") return ended("timed_out");
      } else {
        via = "poll";
        const watch = watching ? context.watch : undefined;
        const ms = Math.min(left, backoff(++step, watch ? WATCHED_POLL : POLL));
        if (watch === undefined) {
          outcome = await clock.delay(Math.ceil(ms), signal);
        } else {
          // Also look again just after the holder's lease would run out.
          const until = Math.max(1, Math.ceil(Math.min(ms, leaseLeft() + 1)));
          const stepped = clock.now();
          const changed = (stop: AbortSignal) =>
            watch(stop).then(() => "woken" as const, () => {
              watching = false; // it threw: polling only from now on
              return "elapsed" as const;
            });
          outcome = await pause(clock, until, signal, changed);
          quick = outcome === "woken" &&
            clock.now() - stepped < POLL.first;
        }
      }
      if (outcome === "aborted") return ended("gone");
      const claim = await context.claim();
      reads++;
      if (claim.state === "unreachable") {
        ended("unreachable");
        return claim;
      }
      if (claim.state !== "in_flight") {
        // Owned before any other woken waiter looks, so that they park on it.
        if (claim.state === "acquired") waiters.owned(slot);
        const waitedMs = clock.now() - begun;
        report(() => ({ type: "woken", slot, via, waitedMs, reads }), started);
        return claim;
      }
      // A new owner with another request: the guard answers 422.
      const theirs = claim.fingerprint;
      if (theirs !== null && theirs !== context.fingerprint) return claim;
      // A watch that wakes at once and finds nothing changed is not
      // trusted again: polling only, so that it cannot spin.
      if (quick) watching = false;
      last = claim;
      lastAt = clock.now();
    }
  } finally {
    waiters.leave();
  }
}
