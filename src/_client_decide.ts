// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What an attempt's outcome means for its operation ({@linkcode decide}):
 * the result to hand back, a retry after a wait, or the error it ends with.
 *
 * @module
 */

import { backoff } from "./_async.ts";
import type { Outcome } from "./_client_attempt.ts";
import type { StopReason } from "./_client_error.ts";
import type { ClientConfig, RetryInfo } from "./_client_options.ts";
import type { Operation } from "./_client_prepare.ts";

/**
 * What an `IdempotentFetch` call resolves to: the last response and how it
 * came.
 *
 * @example Read a result
 * ```ts
 * import { createIdempotentFetch } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * const send = createIdempotentFetch({
 *   fetch: () => Promise.resolve(new Response("bad", { status: 400 })),
 * });
 * const result = await send("http://api.test/orders", { method: "POST", body: "{}" });
 * assert.equal(result.response.status, 400);
 * assert.equal(result.attempts, 1);
 * assert.equal(result.stopped?.reason, "not_retryable");
 * assert.match(result.key ?? "", /^[0-9a-f-]{36}$/);
 * ```
 */
export interface IdempotentFetchResult {
  /** The last response, its body unread. */
  response: Response;
  /** The key every attempt carried, or null when the request had none. */
  key: string | null;
  /** How many attempts were sent, this one included. */
  attempts: number;
  /** Whether the response is a replay (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /**
   * Why this response was not retried, when it is an error (status 400 or
   * more); null for a success.
   */
  stopped: { reason: StopReason; message: string } | null;
}

/** After an attempt: the result to hand back, or the retry to make. */
export type Decision = { result: IdempotentFetchResult } | { retry: RetryInfo };

/** Statuses retried whatever `retryStatuses` says. */
const ALWAYS_RETRIED: ReadonlySet<number> = new Set([409, 429, 503]);

/**
 * What follows an attempt: the result, a retry and its wait, or (after a
 * network error) the `IdempotentFetchError` that ends the operation.
 */
export async function decide(
  config: ClientConfig,
  operation: Operation,
  outcome: Outcome,
): Promise<Decision> {
  return "error" in outcome
    ? failed(config, operation, outcome.error)
    : await answered(config, operation, outcome.response);
}

/** What follows a response: the result, or a retry and its wait. */
async function answered(
  config: ClientConfig,
  operation: Operation,
  response: Response,
): Promise<Decision> {
  const { attempts, key, method, retried } = operation;
  const status = response.status;
  const result = (stopped: IdempotentFetchResult["stopped"]) => ({
    result: {
      response,
      key,
      attempts,
      replayed: response.headers.get(config.replayHeader) === "true",
      stopped,
    },
  });
  if (status < 400) return result(null);
  if (
    !retried ||
    !(ALWAYS_RETRIED.has(status) || config.retryStatuses.has(status))
  ) {
    return result({
      reason: "not_retryable",
      message: notRetried(status, method, retried),
    });
  }
  if (attempts >= config.maxAttempts) {
    return result({
      reason: "attempts",
      message:
        `Gave up after ${attempts} attempts: the last answer was ${status}`,
    });
  }
  const retryAfter = retryAfterMs(
    response.headers.get("retry-after"),
    config.clock(),
  );
  if (retryAfter !== null && retryAfter > config.maxRetryAfter) {
    return result({
      reason: "retry_after",
      message:
        `Gave up after ${attempts} attempt(s): ${status} asked to wait ${retryAfter} ms, more than 'maxRetryAfter' (${config.maxRetryAfter} ms)`,
    });
  }
  const delay = Math.max(retryAfter ?? 0, jittered(config, attempts));
  if (config.clock() + delay >= operation.deadlineAt) {
    return result({
      reason: "deadline",
      message:
        `Gave up after ${attempts} attempt(s): the last answer was ${status}, and the next attempt would start after the 'timeout' of ${config.timeout} ms`,
    });
  }
  // Free the connection; this answer is not handed out.
  await response.body?.cancel().catch(() => {});
  return { retry: { attempt: attempts, key, delay, status, retryAfter } };
}

/** What follows a network error: a retry, or the operation's end. */
function failed(
  config: ClientConfig,
  operation: Operation,
  error: unknown,
): Decision {
  const { attempts, key, method, retried } = operation;
  if (operation.signal.aborted) throw operation.stopped();
  if (!retried) {
    throw operation.fail(
      "not_retryable",
      `Not retried: ${method} without an idempotency key could run twice (${
        describe(error)
      })`,
      error,
    );
  }
  if (attempts >= config.maxAttempts) {
    throw operation.fail(
      "attempts",
      `Gave up after ${attempts} attempts: ${describe(error)}`,
      error,
    );
  }
  const delay = jittered(config, attempts);
  if (config.clock() + delay >= operation.deadlineAt) {
    throw operation.fail(
      "deadline",
      `Gave up after ${attempts} attempt(s): the next one would start after the 'timeout' of ${config.timeout} ms (${
        describe(error)
      })`,
      error,
    );
  }
  return {
    retry: {
      attempt: attempts,
      key,
      delay,
      status: null,
      retryAfter: null,
      error,
    },
  };
}

/** Full jitter up to `min(maxDelay, baseDelay × 2^(attempt−1))`, floored. */
function jittered(config: ClientConfig, attempt: number): number {
  return Math.floor(backoff(attempt, {
    first: config.baseDelay,
    max: config.maxDelay,
    jitter: "full",
    random: config.random,
  }));
}

/**
 * `Retry-After` in milliseconds: delta-seconds, or an HTTP-date (a date in
 * the past is 0); null when absent or unreadable.
 */
function retryAfterMs(value: string | null, now: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/GMT$/.test(text)) return null;
  const date = Date.parse(text);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

function notRetried(status: number, method: string, retried: boolean): string {
  if (!retried) {
    return `Not retried: ${method} without an idempotency key could run twice`;
  }
  if (status === 422) {
    return "Not retried: 422 means the key was used for another request (or the request is invalid); the same request gets the same answer, and a new key could run the operation twice";
  }
  if (status < 500) {
    return `Not retried: ${status} is a client error; the same request gets the same answer`;
  }
  return `Not retried: ${status} is not in 'retryStatuses'`;
}

function describe(error: unknown): string {
  return error instanceof Error
    ? `${error.name}: ${error.message}`
    : String(error);
}
