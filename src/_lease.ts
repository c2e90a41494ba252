// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Lease renewal while handlers run: one shared timer per middleware, not one
 * per request.
 *
 * A timer per request costs about 4 µs to set and clear, which is most of
 * the middleware's budget on a fast handler. Instead every claim in progress
 * joins a set, and one timer ticks every sixth of the lease while the set is
 * not empty; each tick renews the claims last renewed a third of a lease ago
 * or more. So a claim is renewed between a third and a half of a lease after
 * its last renewal, and a handler that answers within a third of its lease
 * (nearly all of them) costs two set operations and no store call. The
 * timer stops itself at the first tick that finds the set empty, and it
 * never keeps the process alive on its own.
 *
 * @module
 */

import { refTimer } from "./_time.ts";
import type { IdempotencyStore } from "./store.ts";

/** One claim being renewed. */
export interface Beat {
  /** The claim's slot. */
  readonly slot: string;
  /** The claim's token. */
  readonly token: string;
  /** When it was claimed or last renewed, by `Date.now()`. */
  renewedAt: number;
  /** When the middleware began on its request, by `performance.now()` (0 when no one listens). */
  readonly started: number;
  /** Whether a renewal is under way. */
  pending: boolean;
  /** Whether it left the set (settled, or lost). */
  stopped: boolean;
  /** When the response body's capture began, by `Date.now()`, if it has. */
  capturingSince?: number;
  /** Ends the capture: called by a tick a lease after it began. */
  stopCapture?: () => void;
  /** Its neighbours in the heartbeat's list while it is in it. */
  prev: Beat | undefined;
  next: Beat | undefined;
}

/** What the heartbeat reports. */
export interface HeartbeatReport {
  /** A renewal found that the claim is no longer this request's. */
  lost(beat: Beat): void;
  /** A renewal threw: the store may be unreachable. */
  error(beat: Beat, error: unknown): void;
}

/**
 * The time a heartbeat runs on: the system's by default; a test passes a fake
 * one so that renewal cadence is checked without waiting. Internal: not an
 * option of the middleware.
 */
export interface HeartbeatClock {
  /** The current time, in milliseconds, like `Date.now()`. */
  now(): number;
  /** Calls `fn` once after `ms`, without keeping the process alive. */
  setTimeout(fn: () => void, ms: number): unknown;
}

const SYSTEM_CLOCK: HeartbeatClock = {
  now: Date.now,
  setTimeout(fn, ms) {
    const timer = setTimeout(fn, ms);
    refTimer(timer, false);
    return timer;
  },
};

/**
 * The options key under which a test hands the middleware the
 * {@linkcode HeartbeatClock} its heartbeat runs on. Internal: not in the
 * options type, and not exported by the package.
 */
export const HEARTBEAT_CLOCK: unique symbol = Symbol("heartbeat clock");

/** Renews the leases of the claims in progress for one middleware. */
export class Heartbeat {
  // The claims renewed, oldest first: a list through the beats themselves,
  // each unlinked both ways as it stops. A Set churned once per request
  // chains its dead hash tables to the live one (see Deadlines in _time.ts).
  #head: Beat | undefined = undefined;
  #tail: Beat | undefined = undefined;
  #size = 0;
  #timer: unknown;
  #store: IdempotencyStore;
  #leaseMs: number;
  #report: HeartbeatReport;
  #clock: HeartbeatClock;

  /**
   * Makes an idle heartbeat.
   *
   * @param store The store to renew claims in.
   * @param leaseMs The lease each renewal asks for.
   * @param report Where losses and errors go.
   * @param clock The time it runs on (tests pass a fake one).
   */
  constructor(
    store: IdempotencyStore,
    leaseMs: number,
    report: HeartbeatReport,
    clock: HeartbeatClock = SYSTEM_CLOCK,
  ) {
    this.#store = store;
    this.#leaseMs = leaseMs;
    this.#report = report;
    this.#clock = clock;
  }

  /** How many claims are being renewed. */
  get size(): number {
    return this.#size;
  }

  /** Whether the timer is scheduled. */
  get ticking(): boolean {
    return this.#timer !== undefined;
  }

  /**
   * Starts renewing a claim.
   *
   * @param slot The claim's slot.
   * @param token The claim's token.
   * @param started When the middleware began on the request, for events.
   * @returns The beat, to pass to {@linkcode Heartbeat.stop}.
   */
  start(slot: string, token: string, started = 0): Beat {
    const beat: Beat = {
      slot,
      token,
      started,
      renewedAt: this.#clock.now(),
      pending: false,
      stopped: false,
      prev: this.#tail,
      next: undefined,
    };
    if (this.#tail === undefined) this.#head = beat;
    else this.#tail.next = beat;
    this.#tail = beat;
    this.#size++;
    if (this.#timer === undefined) this.#schedule();
    return beat;
  }

  /**
   * Marks the start of a response body's capture, and returns a promise that
   * settles once the capture has lasted a whole lease (checked at each tick):
   * a body that slow is streamed on and recorded without its body, so that
   * the claim can never be renewed for ever by a body that does not end.
   *
   * @param beat What `start` returned.
   * @returns The promise to stop the capture on.
   */
  capturing(beat: Beat): Promise<void> {
    beat.capturingSince = this.#clock.now();
    return new Promise<void>((resolve) => beat.stopCapture = resolve);
  }

  /**
   * Stops renewing a claim.
   *
   * @param beat What `start` returned.
   */
  stop(beat: Beat): void {
    if (beat.stopped) return;
    beat.stopped = true;
    const { prev, next } = beat;
    if (prev === undefined) this.#head = next;
    else prev.next = next;
    if (next === undefined) this.#tail = prev;
    else next.prev = prev;
    beat.prev = beat.next = undefined;
    this.#size--;
  }

  #schedule(): void {
    this.#timer = this.#clock.setTimeout(
      () => this.#tick(),
      Math.max(1, Math.floor(this.#leaseMs / 6)),
    );
  }

  #tick(): void {
    this.#timer = undefined;
    if (this.#head === undefined) return;
    const due = this.#clock.now() - this.#leaseMs / 3;
    const now = this.#clock.now();
    let next: Beat | undefined;
    for (
      let beat: Beat | undefined = this.#head;
      beat !== undefined;
      beat = next
    ) {
      next = beat.next; // read first: nothing below may unlink it, but be sure
      if (!beat.pending && beat.renewedAt <= due) this.#renew(beat);
      if (
        beat.stopCapture !== undefined &&
        now - beat.capturingSince! >= this.#leaseMs
      ) {
        beat.stopCapture();
        delete beat.stopCapture;
      }
    }
    this.#schedule();
  }

  #renew(beat: Beat): void {
    beat.pending = true;
    const asked = this.#clock.now();
    this.#store.extend(beat.slot, beat.token, this.#leaseMs).then(
      (outcome) => {
        beat.pending = false;
        if (beat.stopped) return;
        if (outcome === "applied") {
          beat.renewedAt = asked;
        } else {
          this.stop(beat);
          this.#report.lost(beat);
        }
      },
      (error) => {
        beat.pending = false;
        if (!beat.stopped) this.#report.error(beat, error);
      },
    );
  }
}
