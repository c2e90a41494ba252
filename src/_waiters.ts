// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Waiting for the request that holds a key instead of answering 409
 * (`waitForInFlight`): {@linkcode Waiters} keeps, per slot, the requests of
 * this middleware instance that run the handler and the duplicates waiting
 * for them; {@linkcode waitForOwner} is the wait of one duplicate.
 *
 * - **The owner runs here.** The duplicate parks on the slot's waiter list
 *   and touches no store until the owner settles (completes or releases):
 *   the settle wakes every waiter of the slot, and each claims once more,
 *   which finds the completed record (a replay) or, after a release, lets
 *   exactly one of them acquire the slot (the store's claim is atomic) while
 *   the others park again on the new owner.
 * - **The owner runs elsewhere** (another process or instance on the same
 *   store). The duplicate polls the store with jittered exponential backoff:
 *   one claim per step, the first after about 10 ms, doubling up to
 *   {@linkcode MAX_POLL_MS}. A sleeping waiter holds no store connection.
 *   When the store has `waitForChange()` (Deno KV), a step ends early when the
 *   slot's record changes, and the steps start ten times longer and grow up
 *   to {@linkcode MAX_WATCHED_POLL_MS} (a safety net), or end just after the
 *   holder's lease would run out (a watch cannot see a lease expire).
 *
 * A wait ends at the owner's settle, at the deadline (`waitForInFlight`
 * from the first claim: then the 409 as without waiting), or when the
 * request's `signal` aborts (its client left). At most `maxWaiting`
 * duplicates wait at once per middleware instance; past that a duplicate is
 * answered 409 at once.
 *
 * @module
 */

import type { Report } from "./events.ts";
import type { ClaimResult } from "./store.ts";

/** A claim, or the store's failure to answer it (the guard's `Claimed`). */
export type Claimed = ClaimResult | { state: "unreachable"; error: unknown };

/** The first polling step's delay ceiling, in milliseconds; each step doubles it. */
export const FIRST_POLL_MS = 10;
/** The longest delay between two polls of one waiter, in milliseconds. */
export const MAX_POLL_MS = 250;
/**
 * The longest delay between two claims of a waiter that watches its slot
 * (the store has `waitForChange()`): a safety net for a change the watch missed.
 */
export const MAX_WATCHED_POLL_MS = 1_000;

/** How a parked or sleeping waiter's step ended. */
type Step = "woken" | "elapsed" | "gone";

/** One parked waiter: resolved by its owner's settle. */
type Wake = (step: Step) => void;

/** The local owners of one slot and the duplicates parked on them. */
interface SlotState {
  /** How many requests of this instance hold a claim on the slot (a takeover makes two). */
  owners: number;
  /** The parked waiters, each woken once. */
  parked: Set<Wake>;
}

/** The waiters of one middleware instance. */
export class Waiters {
  readonly #waitMs: number;
  readonly #max: number;
  #slots = new Map<string, SlotState>();
  #waiting = 0;

  /**
   * @param waitMs How long a duplicate waits, at most, in milliseconds.
   * @param max How many duplicates may wait at once.
   */
  constructor(waitMs: number, max: number) {
    this.#waitMs = waitMs;
    this.#max = max;
  }

  /** How many duplicates are waiting now. */
  get waiting(): number {
    return this.#waiting;
  }

  /** How long a duplicate waits, at most, in milliseconds. */
  get waitMs(): number {
    return this.#waitMs;
  }

  /**
   * A request of this instance acquired `slot`: duplicates park on it.
   *
   * @param slot The slot.
   */
  owned(slot: string): void {
    const state = this.#slots.get(slot);
    if (state === undefined) {
      this.#slots.set(slot, { owners: 1, parked: new Set() });
    } else {
      state.owners++;
    }
  }

  /**
   * A request of this instance settled `slot` (its record written or the
   * slot released, or the write given to the background): once no owner of
   * this instance is left, every waiter parked on it wakes.
   *
   * @param slot The slot.
   */
  settled(slot: string): void {
    const state = this.#slots.get(slot);
    if (state === undefined || --state.owners > 0) return;
    this.#slots.delete(slot);
    for (const wake of state.parked) wake("woken");
  }

  /** Whether a request of this instance holds `slot`. */
  isOwned(slot: string): boolean {
    return this.#slots.has(slot);
  }

  /** Takes a waiting place; `false` when `maxWaiting` are taken. */
  enter(): boolean {
    if (this.#waiting >= this.#max) return false;
    this.#waiting++;
    return true;
  }

  /** Gives a waiting place back. */
  leave(): void {
    this.#waiting--;
  }

  /**
   * Parks until the slot's local owners settle, `ms` pass, or `signal`
   * aborts. O(1) to park and to leave.
   */
  park(slot: string, ms: number, signal: AbortSignal | null): Promise<Step> {
    const state = this.#slots.get(slot);
    if (state === undefined) return Promise.resolve("woken");
    return pause(ms, signal, (wake) => {
      state.parked.add(wake);
      return () => state.parked.delete(wake);
    });
  }
}

/**
 * Waits `ms`, or until `signal` aborts, or until `enlist`'s wake is called.
 * One timer and at most one abort listener, both removed at the end.
 */
function pause(
  ms: number,
  signal: AbortSignal | null,
  enlist?: (wake: Wake) => () => void,
): Promise<Step> {
  return new Promise<Step>((resolve) => {
    let done = false;
    const end = (step: Step) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", gone);
      delist?.();
      resolve(step);
    };
    const gone = () => end("gone");
    const timer = setTimeout(end, ms, "elapsed");
    signal?.addEventListener("abort", gone, { once: true });
    const delist = enlist?.(end);
  });
}

/** What one duplicate's wait needs from its guard. */
export interface WaitContext {
  readonly slot: string;
  readonly fingerprint: string;
  /** When the middleware began on the request, for events. */
  readonly started: number;
  /** The request's abort signal, read only when the wait begins. */
  readonly signal: () => AbortSignal | null;
  /** Claims the slot once more: one store round trip. */
  readonly claim: () => Promise<Claimed>;
  /** The store's `waitForChange()` for this slot, when it has one. */
  readonly watch: ((signal: AbortSignal) => Promise<void>) | undefined;
  readonly report: Report;
}

/**
 * Waits for the request that holds the slot, as the module doc says, and
 * returns the claim that ends the wait: `completed` (replay it),
 * `acquired` (run the handler; the slot is already marked owned), `in_flight` (the wait timed out, the client
 * left, or no waiting place was free: answer 409; `retryAfterMs` counts from
 * now) or `unreachable` (503).
 *
 * @param waiters The instance's waiters.
 * @param context The duplicate.
 * @param first What the first claim found: in flight, same fingerprint.
 * @returns The last claim.
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
  const begun = performance.now();
  const deadline = begun + waiters.waitMs;
  let reads = 0;
  let step = 0;
  let last: ClaimResult & { state: "in_flight" } = first;
  let lastAt = begun;
  const signal = context.signal();
  let via: "owner" | "poll" = waiters.isOwned(slot) ? "owner" : "poll";
  /** Whether the store's waitForChange() is used (until it throws). */
  let watching = context.watch !== undefined;
  /** Whether the last step's watch woke within the first poll's delay. */
  let quick = false;
  report(() => ({ type: "waiting", slot, via }), started);
  const ended = (reason: "timed_out" | "gone" | "unreachable") => {
    const waitedMs = performance.now() - begun;
    report(
      () => ({ type: "wait_ended", slot, reason, waitedMs, reads }),
      started,
    );
    return {
      ...last,
      retryAfterMs: Math.max(
        1,
        last.retryAfterMs - (performance.now() - lastAt),
      ),
    };
  };
  try {
    for (;;) {
      if (signal?.aborted) return ended("gone");
      const left = deadline - performance.now();
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
        const ceiling = watch
          ? Math.min(MAX_WATCHED_POLL_MS, 10 * FIRST_POLL_MS * 2 ** step++)
          : Math.min(MAX_POLL_MS, FIRST_POLL_MS * 2 ** step++);
        let delay = Math.min(left, ceiling / 2 + Math.random() * ceiling / 2);
        if (watch === undefined) {
          outcome = await pause(Math.ceil(delay), signal);
        } else {
          // Also look again just after the holder's lease would run out.
          delay = Math.min(
            delay,
            last.retryAfterMs - (performance.now() - lastAt) + 1,
          );
          const stop = new AbortController();
          const changed = watch(stop.signal).then(
            () => "woken" as const,
            () => {
              watching = false;
              return "elapsed" as const;
            },
          );
          const stepped = performance.now();
          outcome = await pause(
            Math.max(1, Math.ceil(delay)),
            signal,
            (wake) => {
              changed.then(wake);
              return () => stop.abort();
            },
          );
          quick = outcome === "woken" &&
            performance.now() - stepped < FIRST_POLL_MS;
        }
      }
      if (outcome === "gone") return ended("gone");
      const claim = await context.claim();
      reads++;
      if (claim.state === "unreachable") {
        ended("unreachable");
        return claim;
      }
      if (claim.state !== "in_flight") {
        // Owned before any other woken waiter looks, so that they park on it.
        if (claim.state === "acquired") waiters.owned(slot);
        const waitedMs = performance.now() - begun;
        const how = via;
        report(
          () => ({ type: "woken", slot, via: how, waitedMs, reads }),
          started,
        );
        return claim;
      }
      if (
        claim.fingerprint !== null && claim.fingerprint !== context.fingerprint
      ) {
        // A new owner with another request: the guard answers 422.
        return claim;
      }
      // A watch that wakes at once and finds nothing changed is not
      // trusted again: polling only, so that it cannot spin.
      if (quick) watching = false;
      last = claim;
      lastAt = performance.now();
    }
  } finally {
    waiters.leave();
  }
}
