// Copyright 2026 the @idempotent/http authors. MIT license.
/** Settling a claimed slot, and the events that say how it went. @module */

import { backoff, delay } from "./_async.ts";
import type { Beat, Heartbeat } from "./_heartbeat.ts";
import type { Config } from "./options.ts";
import type { Report, WriteResult } from "./events.ts";
import type { StoredResponse, WriteOutcome } from "./store.ts";

/**
 * A write that threw, being retried until `giveUpAt` (by `performance.now()`)
 * with at most `maxAttempts` in all.
 */
class Retry {
  /** Whether the response went out without it: it runs in the background. */
  background = false;
  /** How many attempts were made. */
  attempts = 1;
  constructor(readonly giveUpAt: number, readonly maxAttempts: number) {}
}

/** The first retry's delay ceiling; each one after doubles it. */
const FIRST_BACKOFF_MS = 20;
/** The longest delay between retries (a quarter lease when that is shorter). */
const MAX_BACKOFF_MS = 2_000;
/** How many times a failed release is tried in all. */
const RELEASE_ATTEMPTS = 4;

/**
 * The settling writes of one middleware instance. A write that throws is
 * retried with jittered exponential backoff, inline for a while, then in the
 * background, with at most `maxPendingCompletions` in the background at once
 * (backpressure) and a way to wait for them all ({@linkcode drain}).
 */
export class Completions {
  #config: Config;
  #heartbeat: Heartbeat;
  #report: Report;
  /** The writes being retried in the background. */
  #pending = new Set<Promise<void>>();
  /** Resolved when a background write ends, for requests held by backpressure. */
  #room: { promise: Promise<void>; resolve: () => void } | undefined;

  /** A claim's beat is stopped in `heartbeat` once its write has an outcome. */
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
    const config = this.#config;
    const write = () => config.store.complete(beat.slot, beat.token, record);
    let outcome: WriteOutcome;
    try {
      outcome = await write();
    } catch (error) {
      reportStoreError(this.#report, beat, "complete", error);
      const failed = performance.now();
      const retry = new Retry(failed + config.completionTimeout, Infinity);
      const task = this.#retry("complete", beat, write, retry).then(
        (outcome) => {
          this.#heartbeat.stop(beat);
          reportCompleted(this.#report, beat, record, outcome, retry);
        },
      );
      await this.#wait(task, retry, failed + config.completionWait);
      return;
    }
    this.#heartbeat.stop(beat);
    reportCompleted(this.#report, beat, record, outcome);
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
  async release(beat: Beat, reason: "thrown" | "not_cacheable"): Promise<void> {
    this.#heartbeat.stop(beat);
    const write = () => this.#config.store.release(beat.slot, beat.token);
    const released = (outcome: WriteResult, attempts: number) =>
      reportReleased(this.#report, beat, reason, outcome, attempts);
    try {
      released(await write(), 1);
      return;
    } catch (error) {
      reportStoreError(this.#report, beat, "release", error);
    }
    if (this.#pending.size >= this.#config.maxPendingCompletions) {
      released("unknown", 1);
      return;
    }
    const giveUpAt = performance.now() + this.#config.lease;
    const retry = new Retry(giveUpAt, RELEASE_ATTEMPTS);
    retry.background = true; // the response does not wait for it
    const task = this.#retry("release", beat, write, retry);
    this.#background(task.then((outcome) => released(outcome, retry.attempts)));
  }

  /**
   * Retries a write that threw until it answers or `retry` is used up; an
   * attempt still unanswered at `giveUpAt` is abandoned. Never rejects.
   */
  async #retry(
    operation: "complete" | "release",
    beat: Beat,
    write: () => Promise<WriteOutcome>,
    retry: Retry,
  ): Promise<WriteResult> {
    const { slot, started } = beat;
    const first = FIRST_BACKOFF_MS;
    const max = Math.min(MAX_BACKOFF_MS, Math.max(1, this.#config.lease / 4));
    for (;;) {
      const left = retry.giveUpAt - performance.now();
      if (left <= 0 || retry.attempts >= retry.maxAttempts) return "unknown";
      const wait = backoff(retry.attempts, { first, max, jitter: "equal" });
      const delayMs = Math.ceil(Math.min(left, wait));
      const attempt = ++retry.attempts;
      const { background } = retry;
      this.#report(() => ({
        type: "write_retry",
        slot,
        operation,
        attempt,
        delayMs,
        background,
      }), started);
      await delay(delayMs);
      try {
        const ms = Math.max(0, retry.giveUpAt - performance.now());
        return await within(write(), ms) ?? "unknown";
      } catch (error) {
        reportStoreError(this.#report, beat, operation, error);
      }
    }
  }

  /**
   * Holds the response while `task` runs, until `until`; then moves it to
   * the background if there is room, else waits for room or for the task
   * (backpressure).
   */
  async #wait(task: Promise<void>, retry: Retry, until: number): Promise<void> {
    let done = false;
    const finished = task.then(() => {
      done = true;
    });
    const left = until - performance.now();
    if (left > 0) await within(finished, left);
    while (!done && this.#pending.size >= this.#config.maxPendingCompletions) {
      await Promise.race([finished, this.#roomFreed()]);
    }
    if (done) return;
    retry.background = true;
    this.#background(task);
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
    if (this.#room === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => resolve = r);
      this.#room = { promise, resolve };
    }
    return this.#room.promise;
  }

  /** Waits until no write is pending in the background, later ones included. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all(this.#pending);
  }
}

/** What `p` resolves to, or `undefined` once `ms` pass first. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  const end = new AbortController();
  try {
    return await Promise.race([p, delay(ms, end.signal).then(() => undefined)]);
  } finally {
    end.abort();
  }
}

/**
 * Reports that `record` was written for `beat`'s claim (`completed`): at the
 * first attempt, before the response went out, unless `retry` says otherwise.
 */
export function reportCompleted(
  report: Report,
  { slot, started }: Beat,
  record: StoredResponse,
  outcome: WriteResult,
  retry?: { readonly attempts: number; readonly background: boolean },
): void {
  const attempts = retry?.attempts ?? 1;
  const background = retry?.background ?? false;
  report(() => ({
    type: "completed",
    slot,
    stored: record.body === null ? record.omitted! : "full",
    bytes: record.body?.byteLength ?? 0,
    outcome,
    attempts,
    background,
  }), started);
}

/** Reports that `beat`'s slot was freed (`released`). */
export function reportReleased(
  report: Report,
  { slot, started }: Beat,
  reason: "thrown" | "not_cacheable",
  outcome: WriteResult,
  attempts = 1,
): void {
  report(
    () => ({ type: "released", slot, reason, outcome, attempts }),
    started,
  );
}

/** Reports that a settling write of `beat`'s claim threw (`store_error`). */
export function reportStoreError(
  report: Report,
  { slot, started }: Beat,
  operation: "complete" | "release",
  error: unknown,
): void {
  report(() => ({ type: "store_error", slot, operation, error }), started);
}
