// Copyright 2026 the @idempotent/http authors. MIT license.
/** The client's options, and their check ({@linkcode configureClient}). @module */

import { delay } from "../_async.ts";
import { DEFAULTS } from "../options.ts";
import {
  headerName,
  isMethodName,
  knownOptions,
  needsOption,
  nonNegativeInteger,
  nonNegativeMs,
  optionalFunction,
  positiveInteger,
  positiveMs,
} from "../_validate.ts";

/**
 * How `createIdempotentFetch()` retries; numbers in ms (but two counts). An
 * unknown name, or a retry option (`baseDelay`, `maxDelay`, `maxRetryAfter`,
 * `retryStatuses`, `onRetry`) with `maxAttempts: 1`, is a `TypeError`.
 */
export interface IdempotentFetchOptions {
  /** Sends each attempt, one `Request` in (so a fetch handler fits too).
   * @default globalThis.fetch */
  fetch?: (request: Request) => Response | Promise<Response>;
  /** The request header that carries the key.
   * @default {"Idempotency-Key"} */
  header?: string;
  /** The response header that marks a replay (its value `true`).
   * @default {"Idempotent-Replayed"} */
  replayHeader?: string;
  /** The methods that get a key (and so are retried), in any case.
   * @default {["POST", "PATCH"]} */
  methods?: readonly string[];
  /** The most attempts per operation, the first included (1: never retry).
   * @default {5} */
  maxAttempts?: number;
  /** The backoff before the first retry, doubled for each next one.
   * @default {500} */
  baseDelay?: number;
  /** The cap of the backoff.
   * @default {10000} */
  maxDelay?: number;
  /** The longest `Retry-After` honoured; a longer one stops (`"retry_after"`).
   * @default {60000} */
  maxRetryAfter?: number;
  /** For the whole operation: no wait ends past it, no attempt runs past it.
   * @default {60000} */
  timeout?: number;
  /** The 5xx statuses retried besides 503 (409, 429 and 503 always are).
   * Not 500 by default: a 500 may come after the handler's side effect, and
   * the middleware released the key (it records only cacheable answers, 2xx
   * by default), so a retry would run it again. 502 and 504 are retried:
   * they usually come from a gateway that got no answer (a handler that
   * answers them itself after a side effect has the same risk). Add 500 only
   * for servers whose handlers answer 500 before any side effect.
   * @default {[502, 504]} */
  retryStatuses?: readonly number[];
  /** The largest stream body kept to send again; a larger one is refused.
   * @default {1048576} */
  maxBodyBytes?: number;
  /** Makes a key for a call that brings none.
   * @default {() => crypto.randomUUID()} */
  generateKey?: () => string;
  /** Called before each wait, with what failed and how long the wait is. */
  onRetry?: (retry: RetryInfo) => void;
  /** Waits `ms`; it need not watch `signal`, an abort ends the wait anyway.
   * @default setTimeout */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** A number in [0, 1) for the jitter.
   * @default Math.random */
  random?: () => number;
  /** Epoch ms, for `Retry-After` dates and the `timeout` check before a wait.
   * @default Date.now */
  clock?: () => number;
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

const CLIENT_OPTIONS =
  "fetch header replayHeader methods maxAttempts baseDelay maxDelay maxRetryAfter timeout retryStatuses maxBodyBytes generateKey onRetry sleep random clock"
    .split(" ");

/** What only matters when there is a retry: no effect with `maxAttempts: 1`. */
const RETRY_OPTIONS = [
  "baseDelay",
  "maxDelay",
  "maxRetryAfter",
  "retryStatuses",
  "onRetry",
] as const;

type Reshaped = "fetch" | "methods" | "retryStatuses" | "onRetry";

/** The options checked, with their defaults. */
export interface ClientConfig
  extends Required<Omit<IdempotentFetchOptions, Reshaped>> {
  fetch: (request: Request) => Promise<Response>;
  methods: ReadonlySet<string>; // upper case
  retryStatuses: ReadonlySet<number>; // and 409, 429, 503: always retried
  onRetry: ((retry: RetryInfo) => void) | undefined;
}

/** Checks the options (`TypeError`, or `RangeError` for a number). */
export function configureClient(options: IdempotentFetchOptions): ClientConfig {
  const must = (name: string, what: string, value: string) =>
    `'${name}' must be ${what}: current value is ${value}`;
  if (options === null || typeof options !== "object") {
    throw new TypeError(must("options", "an object", `${options}`));
  }
  knownOptions("createIdempotentFetch()", options, CLIENT_OPTIONS);
  const methods = options.methods ?? DEFAULTS.methods;
  if (!Array.isArray(methods) || !methods.every(isMethodName)) {
    const value = JSON.stringify(methods);
    throw new TypeError(must("methods", "a list of method names", value));
  }
  // Not 500: see IdempotentFetchOptions.retryStatuses.
  const retryStatuses = options.retryStatuses ?? [502, 504];
  const is5xx = (s: number) => Number.isInteger(s) && s >= 500 && s <= 599;
  if (!Array.isArray(retryStatuses) || !retryStatuses.every(is5xx)) {
    const value = JSON.stringify(retryStatuses);
    throw new RangeError(
      must("retryStatuses", "a list of 5xx statuses", value),
    );
  }
  const send = optionalFunction("fetch", options.fetch) ??
    ((request: Request) => fetch(request));
  const header = options.header ?? DEFAULTS.header;
  const replayHeader = options.replayHeader ?? DEFAULTS.replayHeader;
  headerName("header", header); // kept in the caller's case: messages quote it
  headerName("replayHeader", replayHeader);
  const maxAttempts = positiveInteger("maxAttempts", options.maxAttempts ?? 5);
  for (const name of RETRY_OPTIONS) {
    const given = options[name] !== undefined;
    needsOption(name, given, "'maxAttempts' above 1", maxAttempts > 1);
  }
  return {
    // Unbound (a browser's fetch throws on another `this`); always a promise.
    fetch: async (request) => await send(request),
    header,
    replayHeader,
    methods: new Set(methods.map((m) => m.toUpperCase())),
    maxAttempts,
    baseDelay: nonNegativeMs("baseDelay", options.baseDelay ?? 500),
    maxDelay: nonNegativeMs("maxDelay", options.maxDelay ?? 10_000),
    maxRetryAfter: nonNegativeMs(
      "maxRetryAfter",
      options.maxRetryAfter ?? 60_000,
    ),
    timeout: positiveMs("timeout", options.timeout ?? 60_000),
    retryStatuses: new Set([409, 429, 503, ...retryStatuses]),
    maxBodyBytes: nonNegativeInteger(
      "maxBodyBytes",
      options.maxBodyBytes ?? DEFAULTS.maxRequestBytes, // what the middleware takes
    ),
    generateKey: optionalFunction("generateKey", options.generateKey) ??
      uuidV4,
    onRetry: optionalFunction("onRetry", options.onRetry),
    sleep: optionalFunction("sleep", options.sleep) ??
      (async (ms, signal) => void await delay(ms, signal)),
    random: optionalFunction("random", options.random) ?? Math.random,
    clock: optionalFunction("clock", options.clock) ?? Date.now,
  };
}

function uuidV4(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  // Browsers offer randomUUID only in secure contexts: the same v4 by hand.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return h.replace(/^(.{8})(.{4})(.{4})(.{4})/, "$1-$2-$3-$4-");
}
