// Copyright 2026 the @idempotent/http authors. MIT license.
/** Settling a claimed slot, and the events that say how it went. @module */

import { backoff, within } from "./_async.ts";
import type { Beat, Heartbeat } from "./_heartbeat.ts";
import type { Config } from "./_configure.ts";
import type { Report, WriteResult } from "./events.ts";
import { problemResponse } from "./problem.ts";
import type {
  StoredResponse,
  StoreOperation,
  UnitOfWork,
  WriteOutcome,
} from "./store.ts";

/** A write that threw, retried until `giveUpAt` (on `config.clock`), `maxAttempts` in all. */
class Retry {
  background = false; // the response went out without it
  attempts = 1;
  constructor(readonly giveUpAt: number, readonly maxAttempts: number) {}
}

/** A write answered at its first attempt, inline. */
const FIRST = { attempts: 1, background: false } as const;
/** How many times a release that throws is tried in all (within one lease). */
const RELEASE_ATTEMPTS = 4;
const FIRST_BACKOFF_MS = 20;
const MAX_BACKOFF_MS = 2_000; // or a quarter lease, when shorter

/** One middleware's settling writes (docs/architecture.md, Terminal rule). */
export class Completions {
  #config: Config;
  #heartbeat: Heartbeat;
  #report: Report;
  #pending = new Set<Promise<void>>(); // the writes retried in the background
  // Resolved when a background write ends, for requests held by backpressure.
  #room: PromiseWithResolvers<void> | undefined;

  constructor(config: Config, heartbeat: Heartbeat, report: Report) {
    this.#config = config;
    this.#heartbeat = heartbeat;
    this.#report = report;
  }

  /** Writes the record, retried as the Terminal rule says (given up if it does not seal); never throws. */
  async complete(
    beat: Beat,
    record: StoredResponse,
    fingerprint: string,
  ): Promise<void> {
    const config = this.#config;
    const { slot, token } = beat;
    let stored: StoredResponse;
    try {
      stored = await this.#sealed(slot, fingerprint, record);
    } catch (error) {
      reportStoreError(this.#report, beat, "complete", error);
      this.#heartbeat.stop(beat);
      return reportCompleted(this.#report, beat, record, "unknown");
    }
    const write = () => config.store.complete(slot, token, stored);
    let outcome: WriteOutcome;
    try {
      outcome = await write();
    } catch (error) {
      reportStoreError(this.#report, beat, "complete", error);
      const failed = this.#config.clock.now();
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
   * Frees the slot; never throws. A release that throws only holds the slot
   * for a lease: it is retried 4 times in all, in the background, if there is room.
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
    const retry = new Retry(
      this.#config.clock.now() + beat.leaseMs,
      RELEASE_ATTEMPTS,
    );
    retry.background = true;
    const task = this.#retry("release", beat, write, retry);
    this.#background(task.then((outcome) => released(outcome, retry.attempts)));
  }

  /**
   * Commits the record, fenced, with the handler's writes: `null` when both
   * committed, else the answer: 409 when the claim was lost; when the commit
   * failed, a fenced `release` asks whether it landed (`lost`: yes, 409; else 503).
   */
  async commit(
    unit: UnitOfWork,
    beat: Beat,
    record: StoredResponse,
    fingerprint: string,
    request: Request,
  ): Promise<Response | null> {
    const { store, renderProblem: render } = this.#config;
    const report = this.#report;
    // A renewal would wait on the fenced write's row lock, or, committed
    // meanwhile, fail it under REPEATABLE READ or SERIALIZABLE.
    this.#heartbeat.stop(beat);
    let sealed = false;
    try {
      const stored = await this.#sealed(beat.slot, fingerprint, record);
      sealed = true;
      if (await unit.commit(stored) === "committed") {
        reportCompleted(report, beat, record, "applied");
        return null;
      }
      reportCompleted(report, beat, record, "lost");
      return await problemResponse(
        request,
        "inFlight",
        { retryAfter: 1 },
        render,
      );
    } catch (error) {
      if (!sealed) await unit.rollback(); // else the commit ended it
      reportStoreError(report, beat, "complete", error);
    }
    let released: WriteResult = "unknown";
    try {
      released = await store.release(beat.slot, beat.token);
    } catch (error) {
      reportStoreError(report, beat, "release", error);
    }
    reportReleased(report, beat, "thrown", released);
    if (released === "lost") {
      reportCompleted(report, beat, record, "unknown");
      return await problemResponse(
        request,
        "inFlight",
        { retryAfter: 1 },
        render,
      );
    }
    return await problemResponse(request, "unavailable", {}, render);
  }

  /** The record as the store keeps it: sealed under `encryption`. */
  #sealed(slot: string, fingerprint: string, record: StoredResponse) {
    return this.#config.encryption?.seal(slot, fingerprint, record) ?? record;
  }

  /** Retries a write that threw until it answers or `retry` is used up; never rejects. */
  async #retry(
    operation: "complete" | "release",
    beat: Beat,
    write: () => Promise<WriteOutcome>,
    retry: Retry,
  ): Promise<WriteResult> {
    const { slot, started } = beat;
    const first = FIRST_BACKOFF_MS;
    const max = Math.min(MAX_BACKOFF_MS, Math.max(1, beat.leaseMs / 4));
    for (;;) {
      const left = retry.giveUpAt - this.#config.clock.now();
      if (left <= 0 || retry.attempts >= retry.maxAttempts) return "unknown";
      const wait = backoff(retry.attempts, { first, max, jitter: "equal" });
      const delayMs = Math.ceil(Math.min(left, wait));
      const attempt = ++retry.attempts;
      const { background } = retry;
      const event = { slot, operation, attempt, delayMs, background };
      this.#report(() => ({ type: "write_retry", ...event }), started);
      await this.#config.clock.delay(delayMs);
      try {
        const ms = Math.max(0, retry.giveUpAt - this.#config.clock.now());
        return await within(write(), ms, this.#config.clock) ?? "unknown";
      } catch (error) {
        reportStoreError(this.#report, beat, operation, error);
      }
    }
  }

  /** Holds the response until `until` or the task's end, then while there is no room. */
  async #wait(task: Promise<void>, retry: Retry, until: number): Promise<void> {
    let done = false;
    const finished = task.then(() => void (done = true));
    const left = until - this.#config.clock.now();
    if (left > 0) await within(finished, left, this.#config.clock);
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
    return (this.#room ??= Promise.withResolvers<void>()).promise;
  }

  /** Waits until no write is pending in the background, later ones included. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all(this.#pending);
  }
}

/** Reports `completed`. */
function reportCompleted(
  report: Report,
  { slot, started }: Beat,
  record: StoredResponse,
  outcome: WriteResult,
  { attempts, background }: Pick<Retry, "attempts" | "background"> = FIRST,
): void {
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

function reportReleased(
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

/** Reports `store_error`: a store operation for a claim (or a request) threw. */
export function reportStoreError(
  report: Report,
  { slot, started }: { readonly slot: string | null; readonly started: number },
  operation: StoreOperation,
  error: unknown,
): void {
  report(() => ({ type: "store_error", slot, operation, error }), started);
}
