// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A `fetch` that is safe to retry: every attempt of an operation carries one
 * `Idempotency-Key` (the caller's, else a random UUID v4 for a `POST` or
 * `PATCH`), so a server guarded by `idempotency()` runs it once and replays.
 * Retried: a network error, 409, 429, 503 and `retryStatuses` (502, 504),
 * after `Retry-After` or a backoff with full jitter; not 422 nor other 4xx,
 * nor 500 (it may follow a side effect, and the middleware released the key:
 * a handler that did something answers 2xx, or widens `cacheable`). Methods
 * RFC 9110 calls idempotent are retried without a key; others without one are
 * sent once. Stream and `FormData` bodies are buffered once, so that every
 * attempt sends the same bytes. Web APIs only: it runs on every runtime.
 *
 * @module
 */

import { backoff } from "../_async.ts";
import {
  type ClientConfig,
  configureClient,
  type IdempotentFetchOptions,
  type RetryInfo,
} from "./_options.ts";
import {
  ClientCall,
  type IdempotentRequestInit,
  resendable,
  type StopReason,
} from "./_operation.ts";

export {
  IdempotentFetchError,
  type IdempotentRequestInit,
  type StopReason,
} from "./_operation.ts";
export type { IdempotentFetchOptions, RetryInfo } from "./_options.ts";

/** A configured retrying `fetch`: it resolves whenever a response came (error
 * statuses too) and rejects with an `IdempotentFetchError` when none did. */
export type IdempotentFetch = (
  input: RequestInfo | URL,
  init?: IdempotentRequestInit,
) => Promise<IdempotentFetchResult>;

/** What an `IdempotentFetch` call resolves to. */
export interface IdempotentFetchResult {
  /** The last response, its body unread. */
  response: Response;
  /** The key every attempt carried, or null when the request had none. */
  key: string | null;
  /** How many attempts were sent, this one included. */
  attempts: number;
  /** Whether the response is a replay (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /** Why an error (status 400 or more) was not retried; null for a success. */
  stopped: { reason: StopReason; message: string } | null;
}

/**
 * Makes a `fetch` whose calls are safe to retry, checking the options once
 * (`TypeError`, `RangeError`): make one per API you call, as an SDK client.
 *
 * @example Retry a payment whose first response was lost
 * ```ts
 * import { idempotency } from "@idempotent/http";
 * import { createIdempotentFetch } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * let runs = 0, lost = 0;
 * // One caller, one key space; a server with users scopes by their stable id.
 * const handler = idempotency(
 *   () => new Response(`run ${++runs}`, { status: 201 }),
 *   { scope: "global" },
 * );
 * const send = createIdempotentFetch({
 *   fetch: async (request) => { // in process; the first answer gets lost
 *     const response = await handler(request);
 *     if (lost++ > 0) return response;
 *     await response.body?.cancel();
 *     throw new TypeError("connection reset");
 *   },
 *   sleep: () => Promise.resolve(),
 * });
 * const result = await send("http://api.test/payments", { method: "POST", body: "{}" });
 * assert.equal(result.attempts, 2); // the same key twice: the second is a replay
 * assert.equal(result.replayed, true);
 * assert.equal(await result.response.text(), "run 1");
 * ```
 */
export function createIdempotentFetch(
  options: IdempotentFetchOptions = {},
): IdempotentFetch {
  const config = configureClient(options);
  return async (input, init) => await run(new ClientCall(config, input, init));
}

/**
 * The retrying `fetch` with the default options: a fresh UUID key for a `POST`
 * or `PATCH`, up to 5 attempts within 60 s.
 *
 * @example A `POST` gets a fresh key (a `data:` URL answers any request)
 * ```ts
 * import { idempotentFetch } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * const result = await idempotentFetch("data:,ok", { method: "POST", body: "{}" });
 * assert.equal(await result.response.text(), "ok");
 * assert.match(result.key ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-4/); // a UUID v4
 * assert.equal(result.attempts, 1);
 * ```
 */
export const idempotentFetch: IdempotentFetch = createIdempotentFetch();

async function run(op: ClientCall): Promise<IdempotentFetchResult> {
  try {
    if (op.signal.aborted) throw op.stopped();
    if (op.unbuffered) op.init.body = await resendable(op, op.unbuffered);
    for (;;) {
      // A bad URL or header throws here, uncounted: the caller's error.
      const request = new Request(op.input, op.init);
      op.attempts++;
      const next = await op.config.fetch(request).then(
        (response) => answered(op, response),
        (error) => failed(op, error),
      );
      if ("response" in next) return next;
      op.config.onRetry?.(next);
      await op.pause(next.delay);
    }
  } finally {
    op.end();
  }
}

/** After a response: the result to hand back, or the retry to make. */
async function answered(
  op: ClientCall,
  response: Response,
): Promise<IdempotentFetchResult | RetryInfo> {
  const { config, attempts, key, method, retried } = op;
  const status = response.status;
  const replayed = response.headers.get(config.replayHeader) === "true";
  const result = { response, key, attempts, replayed, stopped: null };
  const stop = (reason: StopReason, message: string) => ({
    ...result,
    stopped: { reason, message },
  });
  if (status < 400) return result;
  if (!retried || !config.retryStatuses.has(status)) {
    return stop(
      "not_retryable",
      !retried
        ? `Not retried: ${method} without an idempotency key could run twice`
        : status === 422
        ? "Not retried: 422 means the key was used for another request (or the request is invalid); the same request gets the same answer, and a new key could run the operation twice"
        : status < 500
        ? `Not retried: ${status} is a client error; the same request gets the same answer`
        : `Not retried: ${status} is not in 'retryStatuses'`,
    );
  }
  const last = `the last answer was ${status}`;
  if (attempts >= config.maxAttempts) {
    return stop("attempts", `Gave up after ${attempts} attempts: ${last}`);
  }
  const retryAfter = retryAfterMs(response, config.clock());
  if (retryAfter !== null && retryAfter > config.maxRetryAfter) {
    return stop(
      "retry_after",
      `Gave up after ${attempts} attempt(s): ${status} asked to wait ${retryAfter} ms, more than 'maxRetryAfter' (${config.maxRetryAfter} ms)`,
    );
  }
  const delay = Math.max(retryAfter ?? 0, jittered(config, attempts));
  if (config.clock() + delay >= op.deadlineAt) {
    return stop(
      "deadline",
      `Gave up after ${attempts} attempt(s): ${last}, and the next attempt would start after the 'timeout' of ${config.timeout} ms`,
    );
  }
  await response.body?.cancel().catch(() => {}); // frees the connection
  return { attempt: attempts, key, delay, status, retryAfter };
}

/** After a network error: the retry to make, or the error that ends it all. */
function failed(op: ClientCall, error: unknown): RetryInfo {
  const { config, attempts: attempt, key, method, retried } = op;
  const stop = (reason: StopReason, message: string) =>
    op.fail(reason, message, error);
  const why = () =>
    error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  if (op.signal.aborted) throw op.stopped();
  if (!retried) {
    throw stop(
      "not_retryable",
      `Not retried: ${method} without an idempotency key could run twice (${why()})`,
    );
  }
  if (attempt >= config.maxAttempts) {
    throw stop("attempts", `Gave up after ${attempt} attempts: ${why()}`);
  }
  const delay = jittered(config, attempt);
  if (config.clock() + delay >= op.deadlineAt) {
    throw stop(
      "deadline",
      `Gave up after ${attempt} attempt(s): the next one would start after the 'timeout' of ${config.timeout} ms (${why()})`,
    );
  }
  return { attempt, key, delay, status: null, retryAfter: null, error };
}

function jittered(config: ClientConfig, attempt: number): number {
  const { baseDelay: first, maxDelay: max, random } = config;
  return Math.floor(backoff(attempt, { first, max, jitter: "full", random }));
}

/** `Retry-After` in ms: seconds or an HTTP-date (past: 0); else null. */
function retryAfterMs(response: Response, now: number): number | null {
  const text = response.headers.get("retry-after")?.trim();
  if (text === undefined) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/GMT$/.test(text)) return null;
  const date = Date.parse(text);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}
