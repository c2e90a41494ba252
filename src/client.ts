// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A `fetch` that is safe to retry: each logical operation gets one
 * `Idempotency-Key`, and every retry of it is sent with that same key, so a
 * server guarded by `idempotency()` (or Stripe, or any server that follows
 * the IETF draft) runs it once and answers the retries with a replay.
 *
 * - **One key per operation.** A random UUID v4 (`crypto.randomUUID()`),
 *   made once per call and sent with every attempt; or the caller's own
 *   (`idempotencyKey`, or an `Idempotency-Key` header already on the
 *   request). v4 rather than v7: the server hashes the key into its slot, so
 *   v7's time order buys no index locality there, while v4's 122 random bits
 *   keep a key unguessable (a guessed key is a read of someone's response
 *   under a global scope) and tell nothing about when it was made.
 * - **What is retried.** A network error (any rejection of `fetch` that is
 *   not an abort: the request may or may not have run, which is exactly what
 *   the key settles), 409 (the first attempt is still running), 429, 503,
 *   and the 5xx of `retryStatuses` (500, 502, 504 by default). `Retry-After`
 *   is honoured (seconds or an HTTP-date), up to `maxRetryAfter`; otherwise
 *   the wait is capped exponential backoff with full jitter (a random wait
 *   between 0 and `min(maxDelay, baseDelay × 2^(n−1))`). At most
 *   `maxAttempts` attempts, within `timeout` for the whole operation, and
 *   the caller's `signal` stops both the wait and the attempt in flight.
 * - **What is not.** 422 (the key was used for another request) or any
 *   other 4xx: the same request gets the same answer, and another key could
 *   run the operation twice, so the key is never changed. The result's
 *   `stopped` says why.
 * - **Methods.** `POST` and `PATCH` (the `methods` option) get a key. The
 *   methods HTTP defines as idempotent (`GET`, `HEAD`, `OPTIONS`, `TRACE`,
 *   `PUT`, `DELETE`) are retried without one. Any other method without a
 *   key is sent once: sending it again could run it twice.
 * - **Bodies.** A string, `ArrayBuffer`, typed array, `Blob` or
 *   `URLSearchParams` is sent again as it is. A `FormData` is serialized
 *   once (its multipart boundary is random, and a new boundary would make
 *   the retry a different request: 422). A stream (or a `Request`'s body) is
 *   read once, up to `maxBodyBytes`, and refused past it.
 *
 * Web platform only: it runs on Deno, Node 20, Bun, Cloudflare Workers and
 * in browsers.
 *
 * @example Retry a payment whose first response was lost
 * ```ts
 * import { idempotency } from "@idempotent/http";
 * import { createIdempotentFetch } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * let runs = 0;
 * const server = Deno.serve(
 *   { hostname: "127.0.0.1", port: 0, onListen() {} },
 *   idempotency(() => Response.json({ id: ++runs }, { status: 201 })),
 * );
 * let lose = true; // the first response is lost on its way back
 * const send = createIdempotentFetch({
 *   fetch: async (request) => {
 *     const response = await fetch(request);
 *     if (!lose) return response;
 *     lose = false;
 *     await response.body?.cancel();
 *     throw new TypeError("connection reset");
 *   },
 *   sleep: () => Promise.resolve(),
 * });
 * const result = await send(`http://127.0.0.1:${server.addr.port}/payments`, {
 *   method: "POST",
 *   body: '{"amount":1999}',
 * });
 * assert.equal(result.response.status, 201);
 * assert.equal(result.attempts, 2);
 * assert.equal(result.replayed, true);
 * assert.deepEqual(await result.response.json(), { id: 1 });
 * assert.equal(runs, 1);
 * await server.shutdown();
 * ```
 *
 * @module
 */

import { attempt, pause } from "./_client_attempt.ts";
import { decide, type IdempotentFetchResult } from "./_client_decide.ts";
import {
  type ClientConfig,
  configure,
  type IdempotentFetchOptions,
} from "./_client_options.ts";
import { type IdempotentRequestInit, prepare } from "./_client_prepare.ts";

export { IdempotentFetchError, type StopReason } from "./_client_error.ts";
export type { IdempotentFetchOptions, RetryInfo } from "./_client_options.ts";
export type { IdempotentFetchResult, IdempotentRequestInit };

/**
 * A configured retrying `fetch`. It takes `fetch`'s arguments (plus
 * `idempotencyKey`) and resolves to an {@linkcode IdempotentFetchResult}
 * whenever a response came, error statuses included (as `fetch` does); it
 * rejects with an {@linkcode IdempotentFetchError} when none did.
 *
 * @example Take any configured client
 * ```ts
 * import { createIdempotentFetch, type IdempotentFetch } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * async function createOrder(send: IdempotentFetch): Promise<number> {
 *   const { response } = await send("http://api.test/orders", { method: "POST", body: "{}" });
 *   return response.status;
 * }
 * const send = createIdempotentFetch({ fetch: () => new Response(null, { status: 201 }) });
 * assert.equal(await createOrder(send), 201);
 * ```
 */
export type IdempotentFetch = (
  input: RequestInfo | URL,
  init?: IdempotentRequestInit,
) => Promise<IdempotentFetchResult>;

/**
 * Makes a `fetch` whose calls are safe to retry: the options are checked
 * once, here, and the function it returns sends each operation with one key
 * until it gets an answer worth handing back. Make one per API you call, as
 * you would configure an SDK client once.
 *
 * @param options How to retry.
 * @returns The retrying `fetch` ({@linkcode IdempotentFetch}).
 * @throws {TypeError} When an option has the wrong type.
 * @throws {RangeError} When a number option is out of range.
 *
 * @example Wait out a 409 while the first attempt runs
 * ```ts
 * import { idempotency } from "@idempotent/http";
 * import { createIdempotentFetch } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * let finish = () => {};
 * const finished = new Promise<void>((resolve) => finish = resolve);
 * const handler = idempotency(async () => {
 *   await finished;
 *   return Response.json({ id: "pay_1" }, { status: 201 });
 * });
 * const first = handler(new Request("http://api.test/payments", {
 *   method: "POST",
 *   headers: { "Idempotency-Key": "k-1" },
 *   body: "{}",
 * }));
 * const send = createIdempotentFetch({
 *   fetch: handler, // in process, no network
 *   sleep: async () => { // the first one settles meanwhile
 *     finish();
 *     await first;
 *   },
 * });
 * const result = await send("http://api.test/payments", {
 *   method: "POST",
 *   body: "{}",
 *   idempotencyKey: "k-1",
 * });
 * assert.equal(result.attempts, 2); // 409, then the replay
 * assert.equal(result.replayed, true);
 * ```
 */
export function createIdempotentFetch(
  options: IdempotentFetchOptions = {},
): IdempotentFetch {
  const config = configure(options);
  return (input, init) => run(config, input, init);
}

/**
 * Sends one operation with the default options: a fresh UUID key for a
 * `POST` or `PATCH`, up to 5 attempts within 60 s. Use
 * {@linkcode createIdempotentFetch} to change them.
 *
 * @param input What `fetch` takes: a URL or a `Request`.
 * @param init What `fetch` takes, plus `idempotencyKey`.
 * @returns The last response and how it came.
 * @throws {IdempotentFetchError} When no response came.
 *
 * @example A POST against a guarded server
 * ```ts
 * import { idempotency } from "@idempotent/http";
 * import { idempotentFetch } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * const server = Deno.serve(
 *   { hostname: "127.0.0.1", port: 0, onListen() {} },
 *   idempotency(() => new Response("created", { status: 201 })),
 * );
 * const url = `http://127.0.0.1:${server.addr.port}/orders`;
 * const first = await idempotentFetch(url, { method: "POST", body: "{}" });
 * assert.equal(await first.response.text(), "created");
 * // The same operation again, by its key: a replay, nothing runs twice.
 * const again = await idempotentFetch(url, {
 *   method: "POST",
 *   body: "{}",
 *   idempotencyKey: first.key!,
 * });
 * assert.equal(again.replayed, true);
 * await again.response.body?.cancel();
 * await server.shutdown();
 * ```
 */
export function idempotentFetch(
  input: RequestInfo | URL,
  init?: IdempotentRequestInit,
): Promise<IdempotentFetchResult> {
  defaultConfig ??= configure({});
  return run(defaultConfig, input, init);
}

let defaultConfig: ClientConfig | undefined;

/** One operation: prepared once, then attempts until an outcome is decided. */
async function run(
  config: ClientConfig,
  input: RequestInfo | URL,
  init: IdempotentRequestInit | undefined,
): Promise<IdempotentFetchResult> {
  const operation = await prepare(config, input, init);
  try {
    for (;;) {
      const outcome = await attempt(config, operation);
      const decision = await decide(config, operation, outcome);
      if ("result" in decision) return decision.result;
      config.onRetry?.(decision.retry);
      await pause(config, operation, decision.retry.delay);
    }
  } finally {
    operation.end();
  }
}
