// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The first step of a client operation: its key, the request every attempt
 * sends, and the signal that stops it ({@linkcode prepare}).
 *
 * @module
 */

import { concatBytes } from "./_bytes.ts";
import { IdempotentFetchError, type StopReason } from "./_client_error.ts";
import type { ClientConfig } from "./_client_options.ts";
import { MAX_KEY_LENGTH, parseIdempotencyKey } from "./key.ts";

/**
 * The `RequestInit` of an `IdempotentFetch` call: a key of the caller's
 * own, besides what `fetch` takes.
 *
 * @example Retry an operation with the key of an earlier call
 * ```ts
 * import { createIdempotentFetch, type IdempotentRequestInit } from "@idempotent/http/client";
 * import assert from "node:assert/strict";
 *
 * const init: IdempotentRequestInit = {
 *   method: "POST",
 *   body: '{"amount":1999}',
 *   idempotencyKey: "order-42-payment",
 * };
 * const send = createIdempotentFetch({
 *   fetch: (request) => new Response(request.headers.get("Idempotency-Key")),
 * });
 * const result = await send("http://api.test/payments", init);
 * assert.equal(await result.response.text(), "order-42-payment");
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

/** The methods RFC 9110 defines as idempotent: retried without a key. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(
  ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"],
);

/**
 * One operation: its key, what each attempt sends, how many were sent, and
 * the signal that stops them (the caller's, or `timeout` passing). Made with
 * {@linkcode prepare}; the constructor throws a `TypeError` for a bad key.
 */
export class Operation {
  readonly input: RequestInfo | URL;
  /** Upper case. */
  readonly method: string;
  readonly headers: Headers;
  readonly key: string | null;
  /** Whether sending it again is safe at all (`maxAttempts` says how often). */
  readonly retried: boolean;
  /** When `timeout` passes, on the configured `clock`. */
  readonly deadlineAt: number;
  /** Each attempt's `RequestInit`, with `headers`, `signal` and the body. */
  readonly init: RequestInit;
  attempts = 0;
  readonly #controller = new AbortController();
  #ended: "aborted" | "deadline" | null = null;
  readonly #timeout: number;
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #callerSignal: AbortSignal | null | undefined;

  constructor(
    config: ClientConfig,
    input: RequestInfo | URL,
    init: IdempotentRequestInit | undefined,
  ) {
    const { idempotencyKey, signal: callerSignal, ...rest } = init ?? {};
    const request = input instanceof Request ? input : undefined;
    this.input = input;
    this.method = (init?.method ?? request?.method ?? "GET").toUpperCase();
    this.headers = new Headers(init?.headers ?? request?.headers);
    this.key = keyOf(config, this.method, this.headers, idempotencyKey);
    if (this.key !== null) this.headers.set(config.header, this.key);
    this.retried = this.key !== null || IDEMPOTENT_METHODS.has(this.method);

    this.#timeout = config.timeout;
    this.deadlineAt = config.clock() + config.timeout;
    this.#timer = setTimeout(() => {
      this.#ended ??= "deadline";
      this.#controller.abort(
        new DOMException(
          `The 'timeout' of ${config.timeout} ms passed`,
          "TimeoutError",
        ),
      );
    }, config.timeout);
    this.#callerSignal = callerSignal ?? request?.signal;
    this.#callerSignal?.addEventListener("abort", this.#onAbort, {
      once: true,
    });
    if (this.#callerSignal?.aborted) this.#onAbort();
    this.init = { ...rest, headers: this.headers, signal: this.signal };
  }

  /** Aborted when the caller's signal aborts or `timeout` passes. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The error the operation ends with, carrying its key and attempts. */
  fail(
    reason: StopReason,
    message: string,
    cause?: unknown,
  ): IdempotentFetchError {
    const data = { reason, key: this.key, attempts: this.attempts };
    return new IdempotentFetchError(
      message,
      cause === undefined ? data : { ...data, cause },
    );
  }

  /** The error of an operation whose {@linkcode signal} aborted. */
  stopped(): IdempotentFetchError {
    const cause = this.signal.reason;
    return this.#ended === "deadline"
      ? this.fail(
        "deadline",
        `Gave up after ${this.attempts} attempt(s): the 'timeout' of ${this.#timeout} ms passed`,
        cause,
      )
      : this.fail(
        "aborted",
        `Aborted after ${this.attempts} attempt(s)`,
        cause,
      );
  }

  /** Clears the `timeout` and stops listening to the caller's signal. */
  end(): void {
    clearTimeout(this.#timer);
    this.#callerSignal?.removeEventListener("abort", this.#onAbort);
  }

  #onAbort = () => {
    this.#ended ??= "aborted";
    this.#controller.abort(this.#callerSignal?.reason);
  };
}

/**
 * Starts an operation, ready for its first attempt, with a body that can be
 * sent again: a stream read once (up to `maxBodyBytes`, else an
 * `IdempotentFetchError`), a `FormData` serialized once.
 */
export async function prepare(
  config: ClientConfig,
  input: RequestInfo | URL,
  init: IdempotentRequestInit | undefined,
): Promise<Operation> {
  const operation = new Operation(config, input, init);
  try {
    if (operation.signal.aborted) throw operation.stopped();
    const source = init?.body !== undefined
      ? init.body
      : input instanceof Request
      ? input.body
      : undefined;
    const body = await resendable(config, operation, source);
    if (body !== undefined) operation.init.body = body;
    return operation;
  } catch (error) {
    operation.end();
    throw operation.signal.aborted && !(error instanceof IdempotentFetchError)
      ? operation.stopped()
      : error;
  }
}

function keyOf(
  config: ClientConfig,
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

/**
 * A stream or `FormData` body of an operation that may be retried, in a form
 * that can be sent again; otherwise undefined (the body is sent as given).
 */
async function resendable(
  config: ClientConfig,
  operation: Operation,
  body: BodyInit | null | undefined,
): Promise<BodyInit | undefined> {
  if (!operation.retried || config.maxAttempts <= 1) return undefined;
  if (body instanceof ReadableStream) {
    return await readBounded(body, config.maxBodyBytes, operation);
  }
  if (typeof FormData !== "undefined" && body instanceof FormData) {
    // Serialized once: each serialization draws a new random boundary.
    const serialized = new Response(body);
    if (!operation.headers.has("content-type")) {
      operation.headers.set(
        "content-type",
        serialized.headers.get("content-type")!,
      );
    }
    return await serialized.blob();
  }
  return undefined;
}

async function readBounded(
  stream: ReadableStream<Uint8Array>,
  limit: number,
  operation: Operation,
): Promise<Uint8Array<ArrayBuffer>> {
  const { signal } = operation;
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
        throw operation.fail(
          "body_too_large",
          `The request body stream is over 'maxBodyBytes' (${limit} bytes), so it cannot be kept to be sent again: pass it as bytes, a string or a Blob, or raise 'maxBodyBytes'`,
        );
      }
      chunks.push(value);
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
  return concatBytes(chunks, size);
}
