// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode Orphans}: the undo of claims that failed but may still land
 * (docs/architecture.md, "Rules": nothing left behind). Private to the stores.
 *
 * @module
 */

import { backoff, type Linked, List, refTimer, type Timer } from "../_async.ts";
import type { WriteOutcome } from "../store.ts";

/** A claim whose caller got an error: see {@linkcode Orphans}. */
export interface Orphan extends Linked<Orphan> {
  readonly slot: string;
  readonly leaseMs: number;
  /** The claim's token (for KV, known once its command came back). */
  token: string | undefined;
  /** When its lease has surely ended (set once it is ready). */
  until: number;
}

/** The waits between passes that failed: 100 ms to 5 s, growing. */
const RETRY = { first: 200, max: 5_000, jitter: "equal" } as const;

/**
 * The pending undo work of one store. A claim answered with an error (the
 * middleware answered 503, so nobody will complete or release it) may still
 * run: a client queued it offline, a hung server holds it, a cancelled
 * statement commits anyway. The store made its token, so it undoes such a
 * claim with a release fenced by that token, a no-op unless that very claim
 * holds the slot. An orphan goes through two states:
 *
 * - **watched** ({@linkcode Orphans.watch}): the claim's command is still
 *   out. The release must not overtake it (sent later on the same connection
 *   it lands after the claim). When the command comes back,
 *   {@linkcode Orphans.cameBack} makes it ready if it acquired the slot or
 *   its outcome is unknown, and forgets it otherwise.
 * - **ready** ({@linkcode Orphans.undo} when the command is back already):
 *   its release is sent, one at a time, oldest first. A pass stops at the
 *   first release that throws and is retried after a backoff, or at once
 *   when {@linkcode Orphans.serviceAnswered} says the service answered. It
 *   is kept until a release answers, or for one lease: by then the orphan's
 *   lease ran out and a new claim takes the slot over anyway. (After a
 *   broken connection the release goes on a new one, and may overtake a
 *   claim a hung server still holds unread: that claim lives one lease.)
 *
 * At most `max` orphans are kept (the oldest dropped first, ready ones
 * before watched ones): a dropped orphan that lands lives at most one lease.
 */
export class Orphans {
  #release: (slot: string, token: string) => Promise<WriteOutcome>;
  #max: number;
  #watched = new List<Orphan>();
  #ready = new List<Orphan>();
  #running = false;
  #timer: Timer | undefined;
  #attempt = 0;

  /**
   * @param release The store's fenced release.
   * @param max The most orphans kept.
   */
  constructor(
    release: (slot: string, token: string) => Promise<WriteOutcome>,
    max = 10_000,
  ) {
    this.#release = release;
    this.#max = max;
  }

  /** How many orphans are watched or ready. */
  get size(): number {
    return this.#watched.size + this.#ready.size;
  }

  /** A claim whose caller got an error while its command is still out. */
  watch(slot: string, token: string | undefined, leaseMs: number): Orphan {
    this.#makeRoom();
    const orphan: Orphan = {
      slot,
      leaseMs,
      token,
      until: Infinity,
      prev: undefined,
      next: undefined,
    };
    this.#watched.push(orphan);
    return orphan;
  }

  /**
   * A watched claim's command came back with `token` when it (may have)
   * acquired the slot under it, else `undefined`.
   */
  cameBack(orphan: Orphan, token: string | undefined): void {
    if (!this.#watched.remove(orphan) || token === undefined) return;
    orphan.token = token;
    orphan.until = Date.now() + orphan.leaseMs;
    this.#ready.push(orphan);
    this.serviceAnswered();
  }

  /** A claim whose outcome is unknown, its command back: releases it. */
  undo(slot: string, token: string, leaseMs: number): void {
    this.cameBack(this.watch(slot, token, leaseMs), token);
  }

  /** The store's service answered something: sends waiting releases now. */
  serviceAnswered(): void {
    if (this.#ready.size === 0 || this.#running) return;
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#running = true;
    this.#pass().finally(() => {
      this.#running = false;
    });
  }

  #makeRoom(): void {
    while (this.size >= this.#max) {
      const from = this.#ready.size > 0 ? this.#ready : this.#watched;
      from.remove(from.head!);
    }
  }

  async #pass(): Promise<void> {
    for (let orphan = this.#ready.head; orphan; orphan = this.#ready.head) {
      if (orphan.until > Date.now()) {
        try {
          await this.#release(orphan.slot, orphan.token!);
        } catch {
          // Still unreachable: try again later, from this orphan on.
          this.#retryLater();
          return;
        }
      }
      this.#ready.remove(orphan);
    }
    this.#attempt = 0;
  }

  #retryLater(): void {
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.serviceAnswered();
    }, backoff(++this.#attempt, RETRY));
    // Never keep a process alive for this: an orphan that is not undone
    // lives one lease at most.
    refTimer(timer, false);
    this.#timer = timer;
  }
}
