// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Undo work for claims that failed but may still land (rule 10: a failed
 * operation leaves nothing behind). Private to the stores.
 *
 * A claim that timed out (or failed with an unknown outcome) has been
 * answered with an error, so the middleware answered 503 and nobody will
 * ever complete or release it. Its command may still run: a client queued it
 * while offline and sends it on reconnect, a hung server already holds it, a
 * cancelled SQL statement committed anyway. The store generated the claim's
 * token, so it can undo the claim with a release fenced by that token: the
 * release deletes the slot only if that very claim holds it, and is a no-op
 * (`lost`) otherwise.
 *
 * An entry is `out` while the claim's own command has not come back: the
 * release must not overtake it (sent later on the same connection it lands
 * after the claim; sent on another connection it could land first and find
 * nothing). When the command comes back acquired, or with an outcome that is
 * unknown (the connection broke under it), the entry is `ready` and the
 * release is sent; when it comes back as anything else (in flight,
 * completed, a server error, never sent), the entry is forgotten. A ready
 * entry is kept until a release answers (`applied` or `lost`), or until one
 * lease after it became ready: by then the orphan's lease has run out and a
 * new claim takes the slot over anyway. When the connection broke under the
 * claim, the release can only go on a new connection: should the old one's
 * claim still wait, unread, at a hung server (a client that gave up its
 * socket on a timer of its own), the release may arrive first and find
 * nothing, and that claim lives one lease.
 *
 * Releases go one at a time, oldest first; a pass stops at the first release
 * that throws (the store is still unreachable) and is retried after a backoff
 * (100 ms doubling to 5 s), or at once when `kick()` reports that the store
 * answered something. The number of entries is bounded (`max`, oldest
 * dropped first): a dropped entry's claim, if it lands, lives at most one
 * lease.
 *
 * @module
 */

import { refTimer, type Timer } from "../_time.ts";
import type { WriteOutcome } from "../store.ts";

interface Entry {
  slot: string;
  leaseMs: number;
  /** When the orphan's lease has surely ended (set once the command is back). */
  until: number;
}

const MIN_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;

/** The pending undo work of one store. */
export class Orphans {
  #release: (slot: string, token: string) => Promise<WriteOutcome>;
  #max: number;
  // By token, oldest first: claims whose command is still out, and claims
  // that (may have) landed and wait for their release.
  #out = new Map<string, Entry>();
  #ready = new Map<string, Entry>();
  #running = false;
  #timer: Timer | undefined;
  #backoff = MIN_BACKOFF_MS;

  /**
   * @param release The store's fenced release.
   * @param max The most entries kept.
   */
  constructor(
    release: (slot: string, token: string) => Promise<WriteOutcome>,
    max = 10_000,
  ) {
    this.#release = release;
    this.#max = max;
  }

  /** How many claims are being watched or undone. */
  get size(): number {
    return this.#out.size + this.#ready.size;
  }

  /** A claim whose caller got an error while its command is still out. */
  out(slot: string, token: string, leaseMs: number): void {
    this.#makeRoom();
    this.#out.set(token, { slot, leaseMs, until: Infinity });
  }

  /**
   * The command of an `out` claim came back: `landed` when it acquired the
   * slot or its outcome is unknown, else `false`.
   */
  settled(token: string, landed: boolean): void {
    const entry = this.#out.get(token);
    if (entry === undefined) return;
    this.#out.delete(token);
    if (!landed) return;
    entry.until = Date.now() + entry.leaseMs;
    this.#ready.set(token, entry);
    this.kick();
  }

  /** A claim that failed with an unknown outcome, its command back already. */
  unknown(slot: string, token: string, leaseMs: number): void {
    this.out(slot, token, leaseMs);
    this.settled(token, true);
  }

  /** The store answered something: retry waiting releases now. */
  kick(): void {
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
      const from = this.#ready.size > 0 ? this.#ready : this.#out;
      from.delete(from.keys().next().value!);
    }
  }

  async #pass(): Promise<void> {
    while (this.#ready.size > 0) {
      const [token, entry] = this.#ready.entries().next().value!;
      if (entry.until > Date.now()) {
        try {
          await this.#release(entry.slot, token);
        } catch {
          // Still unreachable: try again later, from this entry on.
          this.#retry();
          return;
        }
      }
      this.#ready.delete(token);
    }
    this.#backoff = MIN_BACKOFF_MS;
  }

  #retry(): void {
    const delay = this.#backoff;
    this.#backoff = Math.min(MAX_BACKOFF_MS, this.#backoff * 2);
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.kick();
    }, delay);
    // Never keep a process alive for this: an orphan that is not undone
    // lives one lease at most.
    refTimer(timer, false);
    this.#timer = timer;
  }
}
