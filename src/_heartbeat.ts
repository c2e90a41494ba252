// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Lease renewal, one timer per middleware: it ticks every sixth of the
 * shortest lease it renewed while claims are in progress, renewing those last
 * renewed a third of their lease ago or more, so a handler that answers
 * within a third of its lease costs no store call. It stops at a tick that
 * finds none. @module
 */

import { type Clock, type Linked, List, SYSTEM_CLOCK } from "./_async.ts";
import type { IdempotencyStore } from "./store.ts";

/** One claim being renewed, an entry of the heartbeat's list. */
export interface Beat extends Linked<Beat> {
  readonly slot: string;
  readonly token: string;
  /** Its lease, in milliseconds: each renewal extends it by as much. */
  readonly leaseMs: number;
  /** When it was claimed or last renewed, on the heartbeat's clock. */
  renewedAt: number;
  /** When the middleware began on its request, on `config.clock` (0 when no one listens). */
  readonly started: number;
  pending: boolean; // a renewal is under way
  stopped: boolean; // it left the list (settled, or lost)
  /** When the response body's capture began, on the heartbeat's clock, if it has. */
  capturingSince?: number;
  /** Ends the capture: called by a tick a lease after it began. */
  stopCapture?: () => void;
}

/** What the heartbeat reports. */
export interface HeartbeatReport {
  /** A renewal found that the claim is no longer this request's. */
  lost(beat: Beat): void;
  /** A renewal threw: the store may be unreachable. */
  error(beat: Beat, error: unknown): void;
}

/** Renews the leases of the claims in progress for one middleware. */
export class Heartbeat {
  #beats = new List<Beat>();
  #ticking = false;
  #cancel: (() => void) | undefined;
  #store: IdempotencyStore;
  #leaseMs: number;
  #tickMs = Infinity;
  #report: HeartbeatReport;
  #clock: Clock;

  /** An idle heartbeat, renewing claims in `store` for `leaseMs` each time (unless `start()` says). */
  constructor(
    store: IdempotencyStore,
    leaseMs: number | undefined,
    report: HeartbeatReport,
    clock: Clock = SYSTEM_CLOCK,
  ) {
    this.#store = store;
    this.#leaseMs = leaseMs ?? NaN;
    this.#report = report;
    this.#clock = clock;
  }

  /** How many claims are being renewed. */
  get size(): number {
    return this.#beats.size;
  }

  get ticking(): boolean {
    return this.#ticking;
  }

  /** Starts renewing a claim; the beat returned goes to {@linkcode stop}. */
  start(
    slot: string,
    token: string,
    started = 0,
    leaseMs = this.#leaseMs,
  ): Beat {
    const beat: Beat = {
      slot,
      token,
      leaseMs,
      started,
      renewedAt: this.#clock.now(),
      pending: false,
      stopped: false,
      prev: undefined,
      next: undefined,
    };
    this.#beats.push(beat);
    const tickMs = Math.max(1, Math.floor(leaseMs / 6));
    if (tickMs < this.#tickMs) {
      // A shorter lease than any before: tick sooner, from now on.
      this.#tickMs = tickMs;
      this.#cancel?.();
      this.#ticking = false;
    }
    if (!this.#ticking) this.#schedule();
    return beat;
  }

  /**
   * Marks the start of a body's capture; settles once it lasted a whole lease
   * (then the body is streamed on, unrecorded: renewals never run for ever).
   */
  capturing(beat: Beat): Promise<void> {
    beat.capturingSince = this.#clock.now();
    return new Promise<void>((resolve) => beat.stopCapture = resolve);
  }

  /** Stops renewing a claim; stopping it again does nothing. */
  stop(beat: Beat): void {
    beat.stopped = true;
    this.#beats.remove(beat);
  }

  #schedule(): void {
    this.#ticking = true;
    this.#cancel = this.#clock.setTimeout(() => this.#tick(), this.#tickMs);
  }

  #tick(): void {
    this.#ticking = false;
    if (this.#beats.size === 0) return;
    const now = this.#clock.now();
    let next: Beat | undefined;
    for (let beat = this.#beats.head; beat !== undefined; beat = next) {
      next = beat.next; // read first: nothing below may unlink it, but be sure
      if (!beat.pending && beat.renewedAt <= now - beat.leaseMs / 3) {
        this.#renew(beat);
      }
      if (
        beat.stopCapture !== undefined &&
        now - beat.capturingSince! >= beat.leaseMs
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
    this.#store.extend(beat.slot, beat.token, beat.leaseMs).then(
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
