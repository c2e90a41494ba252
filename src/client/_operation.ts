// Copyright 2026 the @idempotent/http authors. MIT license.
/** One client operation ({@linkcode ClientCall}) and how it ends. @module */

import type { Timer } from "../_async.ts";
import { concatBytes } from "../_bytes.ts";
import type { ClientConfig } from "./_options.ts";
import { MAX_KEY_LENGTH, parseIdempotencyKey } from "../key.ts";

/** `fetch`'s `RequestInit`, plus a key of the caller's own. */
export interface IdempotentRequestInit extends RequestInit {
  /** The key (1 to 255 printable ASCII characters, no space, no comma);
   * else the request's header's, else a new one for a method in `methods`. */
  idempotencyKey?: string;
}

/** Why an operation ended without a success. */
export type StopReason =
  /** A final answer (4xx but 409 and 429; a 5xx not retried), or no key. */
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
 * The rejection of an operation that got no response (aborted, `timeout`,
 * network errors, a body too large). It may have run: another call with
 * `idempotencyKey: error.key` finds out safely.
 */
export class IdempotentFetchError extends Error {
  /** Why the operation ended. */
  readonly reason: StopReason;
  /** The key the attempts carried, or null. */
  readonly key: string | null;
  /** How many attempts were sent. */
  readonly attempts: number;

  /** Makes the error; `data.cause`, when given, is the last error. */
  constructor(
    message: string,
    data: Pick<IdempotentFetchError, "reason" | "key" | "attempts"> & {
      cause?: unknown;
    },
  ) {
    super(message, "cause" in data ? { cause: data.cause } : undefined);
    this.name = "IdempotentFetchError";
    this.reason = data.reason;
    this.key = data.key;
    this.attempts = data.attempts;
  }
}

/** The methods RFC 9110 defines as idempotent: retried without a key. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(
  ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"],
);

/** One operation; the constructor throws a `TypeError` for a bad key. */
export class ClientCall {
  readonly method: string;
  readonly headers: Headers;
  readonly key: string | null;
  readonly retried: boolean; // whether sending it again is safe at all
  readonly unbuffered?: ReadableStream<Uint8Array> | FormData; // buffer it
  readonly deadlineAt: number;
  readonly init: RequestInit; // each attempt's
  attempts = 0;
  readonly #controller = new AbortController();
  /** Aborts when the caller's signal does or `timeout` passes (`aborted`). */
  readonly signal: AbortSignal = this.#controller.signal;
  readonly aborted: Promise<void> = new Promise((resolve) =>
    this.signal.addEventListener("abort", () => resolve(), { once: true })
  );
  readonly #timeout: DOMException;
  readonly #timer: Timer;
  readonly #caller: AbortSignal | null | undefined;

  constructor(
    readonly config: ClientConfig,
    readonly input: RequestInfo | URL,
    init: IdempotentRequestInit | undefined,
  ) {
    const { idempotencyKey, signal, ...rest } = init ?? {};
    const request = input instanceof Request ? input : undefined;
    this.method = (init?.method ?? request?.method ?? "GET").toUpperCase();
    this.headers = new Headers(init?.headers ?? request?.headers);
    this.key = this.#keyOf(idempotencyKey);
    if (this.key !== null) this.headers.set(config.header, this.key);
    this.retried = this.key !== null || IDEMPOTENT_METHODS.has(this.method);
    const body = init?.body !== undefined ? init.body : request?.body;
    const form = typeof FormData !== "undefined" && body instanceof FormData;
    const stream = body instanceof ReadableStream;
    const buffer = this.retried && config.maxAttempts > 1 && (form || stream);
    if (buffer) this.unbuffered = body;
    this.deadlineAt = config.clock() + config.timeout;
    const message = `The 'timeout' of ${config.timeout} ms passed`;
    this.#timeout = new DOMException(message, "TimeoutError");
    const abort = () => this.#controller.abort(this.#timeout);
    this.#timer = setTimeout(abort, config.timeout);
    this.#caller = signal ?? request?.signal;
    this.#caller?.addEventListener("abort", this.#onAbort, { once: true });
    if (this.#caller?.aborted) this.#onAbort();
    this.init = { ...rest, headers: this.headers, signal: this.signal };
  }

  /** The error the operation ends with, with its key and attempts. */
  fail(
    reason: StopReason,
    message: string,
    cause?: unknown,
  ): IdempotentFetchError {
    const data = { reason, key: this.key, attempts: this.attempts };
    const all = cause === undefined ? data : { ...data, cause };
    return new IdempotentFetchError(message, all);
  }

  /** The error of an operation whose {@linkcode signal} aborted. */
  stopped(): IdempotentFetchError {
    const { attempts, signal: { reason } } = this;
    return reason === this.#timeout
      ? this.fail(
        "deadline",
        `Gave up after ${attempts} attempt(s): the 'timeout' of ${this.config.timeout} ms passed`,
        reason,
      )
      : this.fail("aborted", `Aborted after ${attempts} attempt(s)`, reason);
  }

  /** Waits through `sleep`, which need not watch the signal: an abort ends it. */
  async pause(ms: number): Promise<void> {
    const { signal } = this;
    if (!signal.aborted) {
      await Promise.race([this.config.sleep(ms, signal).then(), this.aborted])
        .catch((error) => {
          if (!signal.aborted) throw error;
        });
    }
    if (signal.aborted) throw this.stopped();
  }

  end(): void {
    clearTimeout(this.#timer);
    this.#caller?.removeEventListener("abort", this.#onAbort);
  }

  #onAbort = () => this.#controller.abort(this.#caller?.reason);

  /** The caller's key (checked), else a new one for a method in `methods`. */
  #keyOf(given: string | undefined): string | null {
    const { config: { header, methods }, headers } = this;
    const present = headers.get(header);
    if (given !== undefined) {
      checkKey("idempotencyKey", given);
      if (present !== null && present !== given) {
        const [value, its] = [given, present].map((v) => JSON.stringify(v));
        throw new TypeError(
          `'idempotencyKey' differs from the request's ${header} header: current value is ${value}, the header's ${its}`,
        );
      }
      return given;
    }
    if (present !== null) return present; // the caller's, sent as it is
    if (!methods.has(this.method)) return null;
    const key = this.config.generateKey();
    checkKey("generateKey", key);
    return key;
  }
}

function checkKey(name: string, key: unknown): void {
  const parsed = typeof key === "string" ? parseIdempotencyKey(key) : null;
  if (parsed === null || !parsed.ok || parsed.key !== key) {
    const why = parsed && !parsed.ok ? ` (${parsed.reason})` : "";
    const value = JSON.stringify(key);
    throw new TypeError(
      `'${name}' must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters without spaces or commas${why}: current value is ${value}`,
    );
  }
}

const NOT_BYTES = "The request body stream must yield Uint8Array chunks";

/** {@linkcode ClientCall.unbuffered}, kept: a stream up to `maxBodyBytes`, a
 * `FormData` serialized once (each draws a new boundary: another request). */
export async function resendable(
  op: ClientCall,
  body: ReadableStream<Uint8Array> | FormData,
): Promise<BodyInit> {
  const { signal, config: { maxBodyBytes: limit } } = op;
  if (!(body instanceof ReadableStream)) {
    const serialized = new Response(body);
    if (!op.headers.has("content-type")) {
      op.headers.set("content-type", serialized.headers.get("content-type")!);
    }
    return await serialized.blob().catch((error) => {
      throw signal.aborted ? op.stopped() : error;
    });
  }
  const reader = body.getReader();
  void op.aborted.then(() => reader.cancel(signal.reason)).catch(() => {});
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return concatBytes(chunks, size);
      if (!(value instanceof Uint8Array)) throw new TypeError(NOT_BYTES);
      if ((size += value.byteLength) > limit) {
        await reader.cancel("over maxBodyBytes").catch(() => {});
        throw op.fail(
          "body_too_large",
          `The request body stream is over 'maxBodyBytes' (${limit} bytes), so it cannot be kept to be sent again: pass it as bytes, a string or a Blob, or raise 'maxBodyBytes'`,
        );
      }
      chunks.push(value);
    }
  } catch (error) {
    throw signal.aborted && !(error instanceof IdempotentFetchError)
      ? op.stopped()
      : error;
  }
}
