// Copyright 2026 the @idempotent/http authors. MIT license.
/** {@linkcode Orphans}, the stores' undo queue. @module */

import { backoff, type Linked, List, refTimer, type Timer } from "../_async.ts";
import type { StoreEvent, WriteOutcome } from "../store.ts";

/** A claim whose caller got an error: see {@linkcode Orphans}. */
export interface Orphan extends Linked<Orphan> {
  readonly slot: string;
  readonly leaseMs: number;
  /** The claim's token (for KV, known once its command came back). */
  token: string | undefined;
  /** When its lease has surely ended (set once it is ready). */
  until: number;
}

/** The waits between passes that failed, growing to 5 s. */
const RETRY = { first: 200, max: 5_000, jitter: "equal" } as const;

/**
 * The undo queue of one store (docs/architecture.md, "Nothing left behind").
 * An orphan is **watched** ({@linkcode Orphans.watch}) while its claim's
 * command is out, so that its release, sent after it on the same connection,
 * lands after it; {@linkcode Orphans.cameBack} makes it **ready** if the
 * claim may hold the slot. A pass sends ready releases one at a time and
 * stops at the first that throws, retried after a backoff or when
 * {@linkcode Orphans.serviceAnswered}. An orphan is kept until its release
 * answers or for one lease; at most `max` are kept (the oldest dropped
 * first, ready before watched). Each undo's end is told to `onEvent` (the
 * store option) and to each listener of `subscribe()`: `applied` or `lost` as its release answered, `dropped`
 * when it was given up; a listener's throw is ignored.
 */
export class Orphans {
  #watched = new List<Orphan>();
  #ready = new List<Orphan>();
  #running = false;
  #timer: Timer | undefined;
  #attempt = 0;
  /** The store's `onEvent`, set by its constructor. */
  onEvent: ((event: StoreEvent) => void) | undefined = undefined;
  #listeners = new Set<(event: StoreEvent) => void>();

  constructor(
    readonly release: (slot: string, token: string) => Promise<WriteOutcome>,
    readonly max = 10_000,
  ) {}

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

  /** A watched claim's command came back: `token` if it may hold the slot. */
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
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#running = true;
    this.#pass().finally(() => {
      this.#running = false;
    });
  }

  #makeRoom(): void {
    while (this.size >= this.max) {
      const from = this.#ready.size > 0 ? this.#ready : this.#watched;
      const oldest = from.head!;
      from.remove(oldest);
      this.#told(oldest.slot, "dropped");
    }
  }

  async #pass(): Promise<void> {
    for (let orphan = this.#ready.head; orphan; orphan = this.#ready.head) {
      let outcome: StoreEvent["outcome"] = "dropped"; // its lease passed
      if (orphan.until > Date.now()) {
        try {
          outcome = await this.release(orphan.slot, orphan.token!);
        } catch {
          return this.#retryLater(); // from this orphan on
        }
      }
      // Not when #makeRoom dropped it (and said so) meanwhile.
      if (this.#ready.remove(orphan)) this.#told(orphan.slot, outcome);
    }
    this.#attempt = 0;
  }

  /** The store's `subscribe()`: `listener` is told too, once however often added. */
  subscribe(listener: (event: StoreEvent) => void): void {
    if (typeof listener !== "function") {
      throw new TypeError(
        `'listener' must be a function: current value is ${listener}`,
      );
    }
    if (listener !== this.onEvent) this.#listeners.add(listener);
  }

  #told(slot: string, outcome: StoreEvent["outcome"]): void {
    if (this.onEvent === undefined && this.#listeners.size === 0) return;
    const event = { type: "undo", slot, outcome } as const;
    for (const listener of [this.onEvent, ...this.#listeners]) {
      try {
        listener?.(event);
      } catch {
        // A listener's throw changes nothing.
      }
    }
  }

  #retryLater(): void {
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.serviceAnswered();
    }, backoff(++this.#attempt, RETRY));
    refTimer(timer, false); // an orphan not undone lives one lease at most
    this.#timer = timer;
  }
}
