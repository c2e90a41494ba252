// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Why a client operation ended without a success, and the error it rejects
 * with when no response came.
 *
 * @module
 */

/**
 * Why an operation ended without a success.
 *
 * @example Tell a final answer from a wait the server asked for
 * ```ts
 * import { createIdempotentFetch, type StopReason } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * const send = createIdempotentFetch({
 *   fetch: () => new Response(null, { status: 503, headers: { "retry-after": "120" } }),
 * });
 * const { stopped } = await send("http://api.test/orders", { method: "POST" });
 * const reason: StopReason | undefined = stopped?.reason;
 * assert.equal(reason, "retry_after"); // 120 s is more than 'maxRetryAfter'
 * ```
 */
export type StopReason =
  /** The answer is final (a 4xx other than 409 and 429, a 5xx outside
   * `retryStatuses`), or the method has no key and is sent once. */
  | "not_retryable"
  /** `maxAttempts` attempts were made. */
  | "attempts"
  /** `timeout` passed, or the next wait would end past it. */
  | "deadline"
  /** The server asked for a wait longer than `maxRetryAfter`. */
  | "retry_after"
  /** The caller's `signal` aborted. */
  | "aborted"
  /** The stream body is over `maxBodyBytes`. */
  | "body_too_large";

/**
 * Thrown (as a rejection) when an operation ends without a response: the
 * caller aborted, `timeout` passed, every attempt failed on the network, or
 * the body could not be buffered. It carries the key: the operation may
 * have run, and another call with `idempotencyKey: error.key` finds out
 * safely.
 *
 * @example Keep the key of a failed operation
 * ```ts
 * import { createIdempotentFetch, IdempotentFetchError } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * const send = createIdempotentFetch({
 *   maxAttempts: 2,
 *   fetch: () => Promise.reject(new TypeError("connection refused")),
 *   sleep: () => Promise.resolve(),
 * });
 * const error = await send("http://api.test/orders", { method: "POST", body: "{}", idempotencyKey: "k-1" })
 *   .catch((e) => e);
 * assert.ok(error instanceof IdempotentFetchError);
 * assert.equal(error.reason, "attempts");
 * assert.equal(error.key, "k-1");
 * assert.equal(error.attempts, 2);
 * ```
 */
export class IdempotentFetchError extends Error {
  /** Why the operation ended. */
  readonly reason: StopReason;
  /** The key the attempts carried, or null. */
  readonly key: string | null;
  /** How many attempts were sent. */
  readonly attempts: number;

  /**
   * Makes the error.
   *
   * @param message What happened.
   * @param data Why, the key, the attempts, and the last error as `cause`.
   */
  constructor(
    message: string,
    data: {
      reason: StopReason;
      key: string | null;
      attempts: number;
      cause?: unknown;
    },
  ) {
    super(
      message,
      "cause" in data ? { cause: data.cause } : undefined,
    );
    this.name = "IdempotentFetchError";
    this.reason = data.reason;
    this.key = data.key;
    this.attempts = data.attempts;
  }
}
