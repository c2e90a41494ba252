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

import { MAX_KEY_LENGTH, parseIdempotencyKey } from "./key.ts";
import { concatBytes } from "./_bytes.ts";
import {
  headerName as checkedHeaderName,
  nonNegativeInteger,
  optionalFunction,
  positiveInteger,
} from "./_validate.ts";

/**
 * The options of {@linkcode createIdempotentFetch}. Every number is in
 * milliseconds, except `maxAttempts` and `maxBodyBytes`.
 *
 * @example Fewer, quicker retries, with a log line for each
 * ```ts
 * import { createIdempotentFetch, type IdempotentFetchOptions } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * const waits: number[] = [];
 * const options: IdempotentFetchOptions = {
 *   maxAttempts: 3,
 *   baseDelay: 100,
 *   maxDelay: 1_000,
 *   timeout: 10_000,
 *   onRetry: (retry) => waits.push(retry.delay),
 *   fetch: () => Promise.resolve(new Response(null, { status: 503 })),
 *   sleep: () => Promise.resolve(),
 *   random: () => 1,
 * };
 * const result = await createIdempotentFetch(options)("http://api.test/orders", { method: "POST" });
 * assert.equal(result.attempts, 3);
 * assert.equal(result.stopped?.reason, "attempts");
 * assert.deepEqual(waits, [100, 200]);
 * ```
 */
export interface IdempotentFetchOptions {
  /**
   * The `fetch` to send each attempt with. It is called with one `Request`,
   * so a fetch handler (a guarded one, in tests) fits too.
   *
   * @default globalThis.fetch
   */
  fetch?: (request: Request) => Response | Promise<Response>;
  /**
   * The request header that carries the key.
   *
   * @default {"Idempotency-Key"}
   */
  header?: string;
  /**
   * The response header that marks a replay (its value `true`).
   *
   * @default {"Idempotent-Replayed"}
   */
  replayHeader?: string;
  /**
   * The methods that get a key (and so are retried), in any case.
   *
   * @default {["POST", "PATCH"]}
   */
  methods?: readonly string[];
  /**
   * The most attempts per operation, the first included (1: never retry).
   *
   * @default {5}
   */
  maxAttempts?: number;
  /**
   * The backoff before the first retry, doubled for each next one, before
   * jitter.
   *
   * @default {500}
   */
  baseDelay?: number;
  /**
   * The cap of the backoff, before jitter.
   *
   * @default {10000}
   */
  maxDelay?: number;
  /**
   * The longest `Retry-After` honoured. A server that asks for a longer wait
   * gets its answer handed to the caller, with `stopped.reason`
   * `"retry_after"`.
   *
   * @default {60000}
   */
  maxRetryAfter?: number;
  /**
   * The time allowed for the whole operation: every attempt and every wait.
   * A wait that would end past it is not begun; an attempt still running at
   * it is aborted.
   *
   * @default {60000}
   */
  timeout?: number;
  /**
   * The 5xx statuses retried besides 503 (409, 429 and 503 always are).
   *
   * @default {[500, 502, 504]}
   */
  retryStatuses?: readonly number[];
  /**
   * The largest stream body (or `Request` body) buffered so it can be sent
   * again. A larger one is refused with an {@linkcode IdempotentFetchError}
   * (`reason: "body_too_large"`) before anything is sent.
   *
   * @default {1048576}
   */
  maxBodyBytes?: number;
  /**
   * Makes a key for a call that brings none.
   *
   * @default {() => crypto.randomUUID()}
   */
  generateKey?: () => string;
  /** Called before each wait, with what failed and how long the wait is. */
  onRetry?: (retry: RetryInfo) => void;
  /**
   * Waits `ms` milliseconds (tests inject one that does not). It need not
   * watch `signal`: an abort stops the wait anyway.
   *
   * @default setTimeout
   */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * A number in [0, 1) for the jitter.
   *
   * @default Math.random
   */
  random?: () => number;
  /**
   * The time in milliseconds since the epoch, for `Retry-After` dates and
   * the `timeout` checks before each wait (an attempt in flight is bounded
   * by a real timer).
   *
   * @default Date.now
   */
  clock?: () => number;
}

/**
 * The `RequestInit` of an {@linkcode IdempotentFetch} call: a key of the
 * caller's own, besides what `fetch` takes.
 *
 * @example Retry an operation with the key of an earlier call
 * ```ts
 * import type { IdempotentRequestInit } from "@idempotent/http/client";
 *
 * const init: IdempotentRequestInit = {
 *   method: "POST",
 *   body: '{"amount":1999}',
 *   idempotencyKey: "order-42-payment",
 * };
 * ```
 */
export interface IdempotentRequestInit extends RequestInit {
  /**
   * The key to send (1 to 255 printable ASCII characters, no space, no
   * comma). Default: the request's `Idempotency-Key` header, else a new
   * UUID for a method in `methods`, else none.
   */
  idempotencyKey?: string;
}

/** Why an operation ended without a success. */
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
 * What an {@linkcode IdempotentFetch} call resolves to: the last response
 * and how it came.
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

/** What {@linkcode IdempotentFetchOptions.onRetry} is told before a wait. */
export interface RetryInfo {
  /** The attempt that failed, from 1. */
  attempt: number;
  /** The key the retry carries (null for an unkeyed idempotent method). */
  key: string | null;
  /** How long the wait before the retry is, in milliseconds. */
  delay: number;
  /** The status that is retried, or null after a network error. */
  status: number | null;
  /** The server's `Retry-After`, in milliseconds, or null. */
  retryAfter: number | null;
  /** The network error that is retried, or undefined. */
  error?: unknown;
}

/**
 * A configured retrying `fetch`: `fetch`'s arguments, a result that says
 * how the answer came.
 */
export type IdempotentFetch = (
  input: RequestInfo | URL,
  init?: IdempotentRequestInit,
) => Promise<IdempotentFetchResult>;

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

/** The methods RFC 9110 defines as idempotent: retried without a key. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "OPTIONS",
  "TRACE",
  "PUT",
  "DELETE",
]);

/** Statuses retried whatever `retryStatuses` says. */
const ALWAYS_RETRIED: ReadonlySet<number> = new Set([409, 429, 503]);

interface Config {
  fetch: (request: Request) => Promise<Response>;
  header: string;
  replayHeader: string;
  methods: ReadonlySet<string>;
  maxAttempts: number;
  baseDelay: number;
  maxDelay: number;
  maxRetryAfter: number;
  timeout: number;
  retryStatuses: ReadonlySet<number>;
  maxBodyBytes: number;
  generateKey: () => string;
  onRetry: ((retry: RetryInfo) => void) | undefined;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  random: () => number;
  clock: () => number;
}

/**
 * Makes a `fetch` whose calls are safe to retry: the options are checked
 * once, here, and the function it returns sends each operation with one key
 * until it gets an answer worth handing back. Make one per API you call, as
 * you would configure an SDK client once.
 *
 * The returned function takes `fetch`'s arguments (plus `idempotencyKey`)
 * and resolves to an {@linkcode IdempotentFetchResult} whenever a response
 * came, error statuses included (as `fetch` does); it rejects with an
 * {@linkcode IdempotentFetchError} when none did.
 *
 * @param options How to retry.
 * @returns The retrying `fetch`.
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
 * @returns The last response, the key, the number of attempts, whether it
 *   is a replay, and why it was not retried when it is an error.
 * @throws {IdempotentFetchError} When no response came (network errors to
 *   the last attempt, `timeout`, an abort, a stream body too large).
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

let defaultConfig: Config | undefined;

// --- one operation -----------------------------------------------------------

async function run(
  config: Config,
  input: RequestInfo | URL,
  init: IdempotentRequestInit | undefined,
): Promise<IdempotentFetchResult> {
  const { idempotencyKey, signal: callerSignal, ...rest } = init ?? {};
  const method = (init?.method ??
    (input instanceof Request ? input.method : "GET")).toUpperCase();
  const headers = new Headers(
    init?.headers ?? (input instanceof Request ? input.headers : undefined),
  );
  const key = keyOf(config, method, headers, idempotencyKey);
  if (key !== null) headers.set(config.header, key);
  // Whether sending it again is safe at all (`maxAttempts` says how often).
  const retried = key !== null || IDEMPOTENT_METHODS.has(method);

  // One controller for every attempt: the caller's signal, the deadline.
  const controller = new AbortController();
  let ended: "aborted" | "deadline" | null = null;
  const signal = callerSignal ??
    (input instanceof Request ? input.signal : undefined);
  const onAbort = () => {
    ended ??= "aborted";
    controller.abort(signal?.reason);
  };
  const deadlineAt = config.clock() + config.timeout;
  const timer = setTimeout(() => {
    ended ??= "deadline";
    controller.abort(
      new DOMException(
        `The 'timeout' of ${config.timeout} ms passed`,
        "TimeoutError",
      ),
    );
  }, config.timeout);
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) onAbort();

  let attempts = 0;
  const fail = (reason: StopReason, message: string, cause?: unknown) =>
    new IdempotentFetchError(
      message,
      cause === undefined
        ? { reason, key, attempts }
        : { reason, key, attempts, cause },
    );
  const stopped = () =>
    ended === "deadline"
      ? fail(
        "deadline",
        `Gave up after ${attempts} attempt(s): the 'timeout' of ${config.timeout} ms passed`,
        controller.signal.reason,
      )
      : fail(
        "aborted",
        `Aborted after ${attempts} attempt(s)`,
        controller.signal.reason,
      );

  try {
    if (controller.signal.aborted) throw stopped();
    let body: BodyInit | null | undefined;
    const source = init?.body !== undefined
      ? init.body
      : input instanceof Request
      ? input.body
      : undefined;
    if (
      retried && config.maxAttempts > 1 && source !== null &&
      source !== undefined && (source instanceof ReadableStream ||
        (typeof FormData !== "undefined" && source instanceof FormData))
    ) {
      try {
        body = await resendable(source, headers, config, controller);
      } catch (error) {
        if (error instanceof IdempotentFetchError) {
          throw fail(error.reason, error.message);
        }
        if (controller.signal.aborted) throw stopped();
        throw error;
      }
    }
    const attemptInit: RequestInit = { ...rest };
    attemptInit.headers = headers;
    attemptInit.signal = controller.signal;
    if (body !== undefined) attemptInit.body = body;

    for (;;) {
      // Made before the attempt counts: a bad URL or header is the caller's
      // error, thrown as `fetch` throws it, and never retried.
      const request = new Request(input, attemptInit);
      attempts++;
      let response: Response;
      try {
        response = await config.fetch(request);
      } catch (error) {
        if (controller.signal.aborted) throw stopped();
        if (!retried) {
          throw fail(
            "not_retryable",
            `Not retried: ${method} without an idempotency key could run twice (${
              describe(error)
            })`,
            error,
          );
        }
        if (attempts >= config.maxAttempts) {
          throw fail(
            "attempts",
            `Gave up after ${attempts} attempts: ${describe(error)}`,
            error,
          );
        }
        const delay = backoff(config, attempts);
        if (config.clock() + delay >= deadlineAt) {
          throw fail(
            "deadline",
            `Gave up after ${attempts} attempt(s): the next one would start after the 'timeout' of ${config.timeout} ms (${
              describe(error)
            })`,
            error,
          );
        }
        config.onRetry?.({
          attempt: attempts,
          key,
          delay,
          status: null,
          retryAfter: null,
          error,
        });
        await wait(config, delay, controller.signal).catch((e) => {
          throw controller.signal.aborted ? stopped() : e;
        });
        continue;
      }

      const status = response.status;
      const result = (stop: IdempotentFetchResult["stopped"]) => ({
        response,
        key,
        attempts,
        replayed: response.headers.get(config.replayHeader) === "true",
        stopped: stop,
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
      const delay = Math.max(retryAfter ?? 0, backoff(config, attempts));
      if (config.clock() + delay >= deadlineAt) {
        return result({
          reason: "deadline",
          message:
            `Gave up after ${attempts} attempt(s): the last answer was ${status}, and the next attempt would start after the 'timeout' of ${config.timeout} ms`,
        });
      }
      // Free the connection; this answer is not handed out.
      await response.body?.cancel().catch(() => {});
      config.onRetry?.({
        attempt: attempts,
        key,
        delay,
        status,
        retryAfter,
      });
      await wait(config, delay, controller.signal).catch((e) => {
        throw controller.signal.aborted ? stopped() : e;
      });
    }
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

function keyOf(
  config: Config,
  method: string,
  headers: Headers,
  given: string | undefined,
): string | null {
  const present = headers.get(config.header);
  if (given !== undefined) {
    checkKey("idempotencyKey", given);
    if (present !== null && present !== given) {
      throw new TypeError(
        `'idempotencyKey' differs from the request's ${config.header} header: current value is ${
          JSON.stringify(given)
        }, the header's ${JSON.stringify(present)}`,
      );
    }
    return given;
  }
  if (present !== null) return present; // the caller's, sent as it is
  if (!config.methods.has(method)) return null;
  const key = config.generateKey();
  checkKey("generateKey", key);
  return key;
}

function checkKey(name: string, key: unknown): void {
  const parsed = typeof key === "string" ? parseIdempotencyKey(key) : null;
  if (parsed === null || !parsed.ok || parsed.key !== key) {
    throw new TypeError(
      `'${name}' must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters without spaces or commas${
        parsed && !parsed.ok ? ` (${parsed.reason})` : ""
      }: current value is ${JSON.stringify(key)}`,
    );
  }
}

/** A stream or `FormData` body in a form that can be sent again. */
async function resendable(
  body: BodyInit,
  headers: Headers,
  config: Config,
  controller: AbortController,
): Promise<BodyInit> {
  if (body instanceof ReadableStream) {
    return await readBounded(body, config.maxBodyBytes, controller.signal);
  }
  if (typeof FormData !== "undefined" && body instanceof FormData) {
    // Serialized once: each serialization draws a new random boundary.
    const serialized = new Response(body);
    if (!headers.has("content-type")) {
      headers.set("content-type", serialized.headers.get("content-type")!);
    }
    return await serialized.blob();
  }
  return body;
}

async function readBounded(
  stream: ReadableStream<Uint8Array>,
  limit: number,
  signal: AbortSignal,
): Promise<Uint8Array<ArrayBuffer>> {
  const reader = stream.getReader();
  const onAbort = () => void reader.cancel(signal.reason).catch(() => {});
  signal.addEventListener("abort", onAbort, { once: true });
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!(value instanceof Uint8Array)) {
        throw new TypeError(
          "The request body stream must yield Uint8Array chunks",
        );
      }
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel("over maxBodyBytes").catch(() => {});
        throw new IdempotentFetchError(
          `The request body stream is over 'maxBodyBytes' (${limit} bytes), so it cannot be kept to be sent again: pass it as bytes, a string or a Blob, or raise 'maxBodyBytes'`,
          { reason: "body_too_large", key: null, attempts: 0 },
        );
      }
      chunks.push(value);
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
  return concatBytes(chunks, size);
}

/** Full jitter: a random wait up to the capped exponential backoff. */
function backoff(config: Config, attempt: number): number {
  const ceiling = Math.min(
    config.maxDelay,
    config.baseDelay * 2 ** (attempt - 1),
  );
  return Math.floor(config.random() * ceiling);
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

/** Waits, or rejects as soon as `signal` aborts. */
function wait(
  config: Config,
  ms: number,
  signal: AbortSignal,
): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    config.sleep(ms, signal).then(
      () => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) reject(signal.reason);
        else resolve();
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function defaultSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
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
  return error instanceof Error ? `${error.name}: ${error.message}` : String(
    error,
  );
}

function uuidV4(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  // Browsers offer randomUUID only in secure contexts: the same v4 by hand.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${
    h.slice(16, 20)
  }-${h.slice(20)}`;
}

// --- options -----------------------------------------------------------------

function configure(options: IdempotentFetchOptions): Config {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `'options' must be an object: current value is ${options}`,
    );
  }
  const methods = options.methods ?? ["POST", "PATCH"];
  if (
    !Array.isArray(methods) ||
    !methods.every((m) => typeof m === "string" && /^[A-Za-z]+$/.test(m))
  ) {
    throw new TypeError(
      `'methods' must be a list of method names: current value is ${
        JSON.stringify(methods)
      }`,
    );
  }
  const retryStatuses = options.retryStatuses ?? [500, 502, 504];
  if (
    !Array.isArray(retryStatuses) ||
    !retryStatuses.every((s) => Number.isInteger(s) && s >= 500 && s <= 599)
  ) {
    throw new RangeError(
      `'retryStatuses' must be a list of 5xx statuses: current value is ${
        JSON.stringify(retryStatuses)
      }`,
    );
  }
  const given = options.fetch;
  const fetchFunction = optionalFunction("fetch", given) ??
    ((request: Request) => fetch(request));
  return {
    // Called unbound: a browser's fetch throws when called on another object.
    fetch: (request) => {
      try {
        return Promise.resolve(fetchFunction(request));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    header: headerName("header", options.header ?? "Idempotency-Key"),
    replayHeader: headerName(
      "replayHeader",
      options.replayHeader ?? "Idempotent-Replayed",
    ),
    methods: new Set(methods.map((m) => m.toUpperCase())),
    maxAttempts: positiveInteger("maxAttempts", options.maxAttempts ?? 5),
    baseDelay: nonNegativeInteger("baseDelay", options.baseDelay ?? 500),
    maxDelay: nonNegativeInteger("maxDelay", options.maxDelay ?? 10_000),
    maxRetryAfter: nonNegativeInteger(
      "maxRetryAfter",
      options.maxRetryAfter ?? 60_000,
    ),
    timeout: positiveInteger("timeout", options.timeout ?? 60_000),
    retryStatuses: new Set(retryStatuses),
    maxBodyBytes: nonNegativeInteger(
      "maxBodyBytes",
      options.maxBodyBytes ?? 1_048_576,
    ),
    generateKey: optionalFunction("generateKey", options.generateKey) ??
      uuidV4,
    onRetry: optionalFunction("onRetry", options.onRetry),
    sleep: optionalFunction("sleep", options.sleep) ?? defaultSleep,
    random: optionalFunction("random", options.random) ?? Math.random,
    clock: optionalFunction("clock", options.clock) ?? Date.now,
  };
}

/** A header name checked as `_validate.ts` checks it, in the caller's case (messages quote it). */
function headerName(name: string, value: unknown): string {
  checkedHeaderName(name, value);
  return value as string;
}
