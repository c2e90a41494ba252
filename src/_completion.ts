// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The fenced writes that settle a claimed slot, `complete` and `release`,
 * and what happens when one throws: retries with jittered exponential
 * backoff, inline for a while, then in the background, with at most
 * `maxPendingCompletions` in the background at once (backpressure) and a
 * way to wait for them all ({@linkcode Completions.drain}).
 *
 * @module
 */

import type { Beat, Heartbeat } from "./_lease.ts";
import type { Config } from "./_options.ts";
import type { Report, WriteResult } from "./events.ts";
import type { StoredResponse, WriteOutcome } from "./store.ts";

/** Whether a write being retried has been moved to the background. */
interface Job {
  background: boolean;
}

/** A write that ended at its first attempt, before the response was sent. */
const INLINE: Readonly<Job> = { background: false };
/** The first retry's delay ceiling; each one after doubles it. */
const FIRST_BACKOFF_MS = 20;
/** The longest delay between retries (a quarter lease when that is shorter). */
const MAX_BACKOFF_MS = 2_000;
/** How many times a failed release is tried in all. */
const RELEASE_ATTEMPTS = 4;

/** The settling writes of one middleware instance, and those still pending. */
export class Completions {
  #config: Config;
  #heartbeat: Heartbeat;
  #report: Report;
  /** The writes being retried in the background. */
  #pending = new Set<Promise<void>>();
  /** Resolved when a background write ends, for requests held by backpressure. */
  #room: { promise: Promise<void>; resolve: () => void } | undefined;

  /**
   * @param config The middleware's configuration: its store, lease and
   * completion bounds.
   * @param heartbeat Renews the claims; a claim's beat is stopped once its
   * write has an outcome.
   * @param report Where events go.
   */
  constructor(config: Config, heartbeat: Heartbeat, report: Report) {
    this.#config = config;
    this.#heartbeat = heartbeat;
    this.#report = report;
  }

  /**
   * Writes the record; never throws. The common case is one store call. A
   * write that throws is retried until it is `applied` or `lost` (fenced
   * out), or until `completionTimeout`, with the lease renewed all along:
   * inline for up to `completionWait`, then in the background, so that a
   * failed write never hands the slot back to a retry while this process
   * lives. The beat stops at the outcome, not before.
   *
   * @param beat The claim: its slot, token and request's start.
   * @param record What to store.
   */
  async complete(beat: Beat, record: StoredResponse): Promise<void> {
    const { slot, token, started } = beat;
    const write = () => this.#config.store.complete(slot, token, record);
    let outcome: WriteOutcome;
    try {
      outcome = await write();
    } catch (error) {
      this.#report(
        () => ({ type: "store_error", slot, operation: "complete", error }),
        started,
      );
      const config = this.#config;
      const failed = performance.now();
      const job = { background: false };
      const task = this.#retry(
        "complete",
        beat,
        write,
        job,
        failed + config.completionTimeout,
        Infinity,
      ).then(({ outcome, attempts }) => {
        this.#heartbeat.stop(beat);
        this.#completed(beat, record, outcome, attempts, job);
      });
      await this.#wait(task, job, failed + config.completionWait);
      return;
    }
    this.#heartbeat.stop(beat);
    this.#completed(beat, record, outcome, 1, INLINE);
  }

  #completed(
    { slot, started }: Beat,
    record: StoredResponse,
    outcome: WriteResult,
    attempts: number,
    job: Readonly<Job>,
  ): void {
    this.#report(() => ({
      type: "completed",
      slot,
      stored: record.body === null ? record.omitted! : "full",
      bytes: record.body?.byteLength ?? 0,
      outcome,
      attempts,
      background: job.background,
    }), started);
  }

  /**
   * Stops renewing the claim and frees the slot; never throws. A release
   * that throws leaves the slot in flight until its lease runs out: retries
   * get 409 meanwhile, never a second run. So it is retried only cheaply: in
   * the background, when there is room, a few times within one lease (after
   * which the slot is free anyway). The response never waits for those
   * retries.
   *
   * @param beat The claim: its slot, token and request's start.
   * @param reason Why the slot is freed, for the event.
   */
  async release(
    beat: Beat,
    reason: "thrown" | "not_cacheable",
  ): Promise<void> {
    this.#heartbeat.stop(beat);
    const { slot, token, started } = beat;
    const write = () => this.#config.store.release(slot, token);
    const released = (outcome: WriteResult, attempts: number) =>
      this.#report(
        () => ({ type: "released", slot, reason, outcome, attempts }),
        started,
      );
    try {
      released(await write(), 1);
      return;
    } catch (error) {
      this.#report(
        () => ({ type: "store_error", slot, operation: "release", error }),
        started,
      );
    }
    if (this.#pending.size >= this.#config.maxPendingCompletions) {
      released("unknown", 1);
      return;
    }
    const job = { background: true };
    this.#background(
      this.#retry(
        "release",
        beat,
        write,
        job,
        performance.now() + this.#config.lease,
        RELEASE_ATTEMPTS,
      ).then(({ outcome, attempts }) => released(outcome, attempts)),
    );
  }

  /**
   * Retries a fenced write that threw, with jittered exponential backoff,
   * until it answers, `maxAttempts` were made, or `giveUpAt` (by
   * `performance.now()`) has passed; an attempt still unanswered then is
   * abandoned. Never rejects.
   */
  async #retry(
    operation: "complete" | "release",
    { slot, started }: Beat,
    write: () => Promise<WriteOutcome>,
    job: Job,
    giveUpAt: number,
    maxAttempts: number,
  ): Promise<{ outcome: WriteResult; attempts: number }> {
    let attempts = 1;
    const cap = Math.min(MAX_BACKOFF_MS, Math.max(1, this.#config.lease / 4));
    for (;;) {
      const left = giveUpAt - performance.now();
      if (left <= 0 || attempts >= maxAttempts) {
        return { outcome: "unknown", attempts };
      }
      const ceiling = Math.min(cap, FIRST_BACKOFF_MS * 2 ** (attempts - 1));
      const delayMs = Math.ceil(
        Math.min(left, ceiling / 2 + Math.random() * ceiling / 2),
      );
      attempts++;
      const attempt = attempts;
      this.#report(() => ({
        type: "write_retry",
        slot,
        operation,
        attempt,
        delayMs,
        background: job.background,
      }), started);
      await timer(delayMs).promise;
      try {
        const deadline = timer(Math.max(0, giveUpAt - performance.now()));
        try {
          const pending = write();
          // An attempt abandoned at the deadline may still fail: not unhandled.
          pending.catch(() => {});
          const outcome = await Promise.race([pending, deadline.promise]);
          if (outcome !== undefined) return { outcome, attempts };
        } finally {
          deadline.cancel();
        }
        return { outcome: "unknown", attempts };
      } catch (error) {
        this.#report(
          () => ({ type: "store_error", slot, operation, error }),
          started,
        );
      }
    }
  }

  /**
   * Holds the response while `task` runs, until `until` (by
   * `performance.now()`); then moves the task to the background if fewer
   * than `maxPendingCompletions` are there, else keeps waiting until one
   * ends or the task does (backpressure).
   */
  async #wait(task: Promise<void>, job: Job, until: number): Promise<void> {
    let done = false;
    const finished = task.then(() => {
      done = true;
    });
    const left = until - performance.now();
    if (left > 0) {
      const pause = timer(left);
      await Promise.race([finished, pause.promise]);
      pause.cancel();
    }
    while (!done) {
      if (this.#pending.size < this.#config.maxPendingCompletions) {
        job.background = true;
        this.#background(task);
        return;
      }
      await Promise.race([finished, this.#roomFreed()]);
    }
  }

  #background(task: Promise<void>): void {
    this.#pending.add(task);
    task.then(() => {
      this.#pending.delete(task);
      const room = this.#room;
      this.#room = undefined;
      room?.resolve();
    });
  }

  #roomFreed(): Promise<void> {
    this.#room ??= deferred();
    return this.#room.promise;
  }

  /**
   * Waits until no write is pending in the background, those started
   * meanwhile included.
   *
   * @returns A promise that resolves when none is pending.
   */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all(this.#pending);
  }
}

/** A promise resolved after `ms`, and a way to cancel its timer. */
function timer(ms: number): { promise: Promise<void>; cancel(): void } {
  let id: ReturnType<typeof setTimeout> | undefined;
  const promise = new Promise<void>((resolve) => {
    id = setTimeout(resolve, ms);
  });
  return { promise, cancel: () => clearTimeout(id) };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => resolve = r);
  return { promise, resolve };
}
