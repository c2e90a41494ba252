// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode idempotency}: the middleware.
 *
 * @module
 */

import { concatBytes } from "./_bytes.ts";
import { sha256Hex } from "./_sha256.ts";
import { nonNegativeInteger, positiveInteger } from "./_validate.ts";
import { capture } from "./capture.ts";
import type { IdempotencyEvent, WriteResult } from "./events.ts";
import { codeUnits, requestFingerprint, slotOf } from "./fingerprint.ts";
import { parseIdempotencyKey } from "./key.ts";
import { type Beat, Heartbeat } from "./lease.ts";
import { PROBLEM_TYPES, problemResponse } from "./problem.ts";
import { SettleEstimate } from "./_retry_hint.ts";
import { MemoryStore } from "./stores/memory.ts";
import type {
  IdempotencyStore,
  OmittedReason,
  StoredResponse,
  WriteOutcome,
} from "./store.ts";

/**
 * The `info` argument `Deno.serve` passes a handler, written out member for
 * member (`Deno.ServeHandlerInfo` fits it) so that the package's types name
 * no `Deno` namespace: `tsc` on Node or Bun, without Deno's types, checks
 * them as they are.
 */
export interface ServeHandlerInfo {
  /** The remote address of the connection, as `Deno.Addr`. */
  remoteAddr:
    | { transport: "tcp" | "udp"; hostname: string; port: number }
    | { transport: "unix" | "unixpacket"; path: string }
    | { transport: "vsock"; cid: number; port: number };
  /** Settles when the response has been sent (rejects if it could not be). */
  completed: Promise<void>;
}

/**
 * A fetch handler: `Deno.serve`'s shape, with whatever arguments follow the
 * request (`info` for `Deno.serve`, `env` and `ctx` elsewhere) passed through.
 */
export type FetchHandler<A extends unknown[] = [info?: ServeHandlerInfo]> = (
  request: Request,
  ...args: A
) => Response | Promise<Response>;

/** Options of {@linkcode idempotency}. Every field is optional. */
export interface IdempotencyOptions {
  /**
   * Where records are kept. Share one store between the middleware
   * instances that must see each other's keys.
   *
   * @default {new MemoryStore()}
   */
  store?: IdempotencyStore;
  /**
   * The scope of a request's key: requests in different scopes never share a
   * record, even with the same key. Return the tenant or principal the
   * request acts for. May be async; a throw propagates as the handler's would.
   *
   * @default {() => ""} (one global scope)
   */
  scope?: (request: Request) => string | Promise<string>;
  /**
   * The request header that carries the key.
   *
   * @default {"Idempotency-Key"}
   */
  header?: string;
  /**
   * The methods the middleware guards, compared in any case (a request sent
   * as `patch` is guarded by `PATCH`); any other is a bare call-through.
   *
   * @default {["POST", "PATCH"]}
   */
  methods?: readonly string[];
  /**
   * Whether a guarded request without a key is answered 400 instead of
   * passed through.
   *
   * @default {false}
   */
  required?: boolean;
  /**
   * How long a record is kept, in milliseconds, from the first claim.
   *
   * @default {86_400_000} (24 hours)
   */
  ttl?: number;
  /**
   * How long a claim is owned without renewal, in milliseconds. It is
   * renewed while the handler runs, between a third and a half of it after
   * the last renewal; after a crash, a retry may run the handler again once
   * it runs out. Keep it longer than the handler's longest pause.
   *
   * A 409's `Retry-After` is at most the rest of the holder's lease: once
   * this middleware has run a request, it is how long its requests usually
   * take to settle (a running estimate of the mean plus four mean
   * deviations) minus the time since the holder's claim or last renewal, at
   * least 1 s, rounded up to whole seconds; before that, the rest of the
   * lease.
   *
   * @default {30_000}
   */
  lease?: number;
  /**
   * The largest request body buffered for the fingerprint; larger ones are
   * answered 413 (guarded requests with a key only).
   *
   * @default {1_048_576} (1 MiB)
   */
  maxRequestBytes?: number;
  /**
   * The largest response body recorded. A larger cacheable response is
   * streamed to the client in full and recorded without its body.
   *
   * @default {1_048_576} (1 MiB)
   */
  maxResponseBytes?: number;
  /**
   * Which responses are recorded and replayed. The others release the key,
   * so that a retry runs the handler again.
   *
   * @default {(response) => response.ok} (2xx)
   */
  cacheable?: (response: Response) => boolean;
  /**
   * The request's fingerprint: a retry with the same key and another
   * fingerprint is answered 422. `body` is the request body, read once. What
   * it returns is hashed (SHA-256) before it is stored, so it may return
   * request data without that data reaching the store. The default needs a
   * retry to send the same bytes: for clients that re-encode the body on
   * each attempt (a new multipart boundary, JSON keys in another order),
   * return what matters, such as a canonical form of the parsed body.
   *
   * @default {requestFingerprint} (method, path with query, body)
   */
  fingerprint?: (
    request: Request,
    body: Uint8Array,
  ) => string | Promise<string>;
  /**
   * Whether to run the handler unguarded when the store cannot be reached,
   * instead of answering 503.
   *
   * @default {false}
   */
  failOpen?: boolean;
  /**
   * Response headers left out of records, so that a replay never carries
   * them (names, any case). For headers that belong to one response rather
   * than to the operation: a request id, a CORS origin echoed by the
   * handler, a fresh `Set-Cookie` session. The live response keeps them; a
   * replay leaves them out even when an older record holds them. `Date` is
   * left out by default: the runtime dates each replay when it sends it.
   * `Content-Length`, `Transfer-Encoding`, `Connection` and `Keep-Alive` are
   * never stored, whatever this says. Passing a list replaces the default.
   *
   * @default {["date"]}
   */
  unstoredHeaders?: readonly string[];
  /**
   * The response header that marks a replay, with the value `true`.
   *
   * @default {"Idempotent-Replayed"}
   */
  replayHeader?: string;
  /**
   * Receives an event for every outcome (see {@linkcode IdempotencyEvent}).
   * It runs synchronously on the request path; a throw is ignored.
   *
   * @default {undefined}
   */
  onEvent?: (event: IdempotencyEvent) => void;
  /**
   * How long, in milliseconds from its first failure, a cacheable response
   * waits for its record to be written. A write that throws is retried (the
   * claim's lease kept renewed) until it lands or is fenced out; the response
   * is sent as soon as it does, or once this time has passed, and the write
   * then goes on in the background (see `maxPendingCompletions`). The
   * first attempt is bounded by the store's own timeout; when it answers,
   * there is nothing to wait for.
   *
   * @default {1_000}
   */
  completionWait?: number;
  /**
   * How long, in milliseconds from its first failure, a record's write is
   * retried (with jittered exponential backoff, at most 2 s apart) before it
   * is given up: a `completed` event with outcome `unknown`. Past it, the
   * claim's lease is no longer renewed, and a retry may run the handler
   * again once the lease has run out.
   *
   * @default {300_000} (5 minutes)
   */
  completionTimeout?: number;
  /**
   * How many record writes one middleware instance retries in the background
   * at once. Each holds its record (at most `maxResponseBytes` of body) until
   * it ends. Past this bound a response waits until one ends, or until its
   * own write ends (backpressure): a write is never dropped. 0 makes every
   * failing write wait inline. {@linkcode drainCompletions} waits for them.
   *
   * @default {100}
   */
  maxPendingCompletions?: number;
}

/** The header on a replay whose body was not recorded: its value is the reason. */
export const BODY_OMITTED_HEADER = "Idempotent-Body-Omitted";
const OMITTED_NAME = BODY_OMITTED_HEADER.toLowerCase();

/** Statuses whose responses have no body, live or replayed. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** Headers not kept in a record: the runtime frames the replay itself. */
const UNSTORED = new Set([
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
]);
const EMPTY: Uint8Array<ArrayBuffer> = new Uint8Array(0);
const STORE_RETRY_SECONDS = 1;

/**
 * Wraps a fetch handler so that a request carrying an `Idempotency-Key` runs
 * it at most once per key: a retry gets the first response back, byte for
 * byte, with `Idempotent-Replayed: true`; a retry that races the first is
 * answered 409; a key reused for another request is answered 422.
 *
 * Requests with another method, or without a key while keys are optional,
 * go straight to the handler: no body read, no hash, no store call. A guarded
 * request whose body broke off mid-read is answered 400, with nothing
 * claimed; one whose body was already read before the middleware is a
 * programming error, and the guarded handler rejects with a `TypeError`.
 *
 * A guarded handler gets a request with the same method, URL, headers, body
 * bytes and `signal` as the original. `req.clone()`, `new Request(req)` and
 * `fetch(req)` do not carry that signal: pass `signal: req.signal` when you
 * proxy the request.
 *
 * @typeParam A The arguments after the request, passed through.
 * @param handler The handler to guard.
 * @param options Store, scope, limits and hooks.
 * @returns The guarded handler.
 * @throws {TypeError} When an option has the wrong type.
 * @throws {RangeError} When a number option is out of range.
 *
 * @example One execution, one replay
 * ```ts
 * import { idempotency, MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let charges = 0;
 * const handler = idempotency(async (req) => {
 *   const { amount } = await req.json();
 *   charges++;
 *   return Response.json({ charged: amount }, { status: 201 });
 * }, { store: new MemoryStore() });
 *
 * const pay = () =>
 *   new Request("http://localhost/payments", {
 *     method: "POST",
 *     headers: { "idempotency-key": "order-42" },
 *     body: JSON.stringify({ amount: 100 }),
 *   });
 * const first = await handler(pay());
 * const retry = await handler(pay());
 * assert.equal(charges, 1);
 * assert.equal(retry.status, 201);
 * assert.equal(retry.headers.get("idempotent-replayed"), "true");
 * assert.deepEqual(await retry.json(), await first.json());
 * ```
 */
export function idempotency<
  A extends unknown[] = [info?: ServeHandlerInfo],
>(
  handler: FetchHandler<A>,
  options: IdempotencyOptions = {},
): FetchHandler<A> {
  if (typeof handler !== "function") {
    throw new TypeError(
      `'handler' must be a function: current value is ${handler}`,
    );
  }
  const config = configure(options);
  const methods = config.methods;
  const header = config.header;
  const guarded = new Guard(handler, config);
  const passThrough = unguardedMethods(methods);
  const idempotent = function idempotent(request: Request, ...args: A) {
    // Method names are compared case-insensitively (`fetch` sends `patch` as
    // written and `Deno.serve` passes it on as sent), but an unguarded
    // standard method still costs one lookup: the exact name first.
    const method = request.method;
    if (
      passThrough.has(method) ||
      (!methods.has(method) && !methods.has(method.toUpperCase()))
    ) {
      return handler(request, ...args);
    }
    const value = request.headers.get(header);
    if (value === null && !config.required) return handler(request, ...args);
    return guarded.handle(request, value, args);
  };
  GUARDS.set(idempotent, guarded);
  return idempotent;
}

/** The guard behind each handler `idempotency()` returned, for draining. */
const GUARDS = new WeakMap<object, { drain(): Promise<void> }>();

/**
 * Waits until every record write that a guarded handler is retrying in the
 * background has ended: landed, fenced out, or given up after
 * `completionTimeout`. Call it at shutdown, after the server stopped taking
 * requests, so that no completion is cut off by the exit (a cut-off one lets
 * a retry run the handler again once its lease has run out). Writes started
 * while it waits are waited for too.
 *
 * Pending writes keep the process alive by their timers until they end;
 * with a healthy store there are none and this resolves at once.
 *
 * @param handler A handler returned by {@linkcode idempotency}.
 * @returns A promise that resolves when none is pending.
 * @throws {TypeError} When `handler` did not come from `idempotency()`.
 *
 * @example Flush before exit
 * ```ts
 * import { drainCompletions, idempotency } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const handler = idempotency(() => new Response("ok", { status: 201 }));
 * const res = await handler(new Request("http://localhost/pay", {
 *   method: "POST",
 *   headers: { "idempotency-key": "k1" },
 * }));
 * assert.equal(await res.text(), "ok");
 * // Deno.serve(...).shutdown() first, then:
 * await drainCompletions(handler);
 * ```
 */
export function drainCompletions(
  handler: (request: Request, ...args: never[]) => unknown,
): Promise<void> {
  const guard = typeof handler === "function" ? GUARDS.get(handler) : undefined;
  if (guard === undefined) {
    return Promise.reject(
      new TypeError(
        `'handler' must be a handler returned by idempotency(): current value is ${handler}`,
      ),
    );
  }
  return guard.drain();
}

/** The standard methods, in the case `Request` normalizes them to. */
const STANDARD_METHODS = [
  "CONNECT",
  "DELETE",
  "GET",
  "HEAD",
  "OPTIONS",
  "PATCH",
  "POST",
  "PUT",
  "QUERY",
  "TRACE",
];

/** The standard method names that pass through, spelled as usually sent. */
function unguardedMethods(guarded: Set<string>): Set<string> {
  return new Set(STANDARD_METHODS.filter((m) => !guarded.has(m)));
}

interface Config {
  store: IdempotencyStore;
  scope: ((request: Request) => string | Promise<string>) | undefined;
  header: string;
  methods: Set<string>;
  required: boolean;
  ttl: number;
  lease: number;
  maxRequestBytes: number;
  maxResponseBytes: number;
  cacheable: (response: Response) => boolean;
  fingerprint:
    | ((request: Request, body: Uint8Array) => string | Promise<string>)
    | undefined;
  failOpen: boolean;
  replayHeader: string;
  unstoredHeaders: ReadonlySet<string>;
  onEvent: ((event: IdempotencyEvent) => void) | undefined;
  completionWait: number;
  completionTimeout: number;
  maxPendingCompletions: number;
}

function configure(options: IdempotencyOptions): Config {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `'options' must be an object: current value is ${options}`,
    );
  }
  const store = options.store ?? new MemoryStore();
  for (const method of ["claim", "complete", "release", "extend"] as const) {
    if (typeof store?.[method] !== "function") {
      throw new TypeError(
        `'store' must implement IdempotencyStore: '${method}' is not a function`,
      );
    }
  }
  const methods = options.methods ?? ["POST", "PATCH"];
  if (
    !Array.isArray(methods) || methods.length === 0 ||
    !methods.every((m) => typeof m === "string" && /^[A-Za-z]+$/.test(m))
  ) {
    throw new TypeError(
      `'methods' must be a non-empty list of method names: current value is ${
        JSON.stringify(methods)
      }`,
    );
  }
  const ttl = positiveInteger("ttl", options.ttl ?? 86_400_000);
  const lease = positiveInteger("lease", options.lease ?? 30_000);
  if (lease > ttl) {
    throw new RangeError(
      `'lease' must not exceed 'ttl' (${ttl}): current value is ${lease}`,
    );
  }
  const completionWait = nonNegativeInteger(
    "completionWait",
    options.completionWait ?? 1_000,
  );
  const completionTimeout = positiveInteger(
    "completionTimeout",
    options.completionTimeout ?? 300_000,
  );
  if (completionWait > completionTimeout) {
    throw new RangeError(
      `'completionWait' must not exceed 'completionTimeout' (${completionTimeout}): current value is ${completionWait}`,
    );
  }
  return {
    store,
    scope: optionalFunction("scope", options.scope),
    header: headerName("header", options.header ?? "Idempotency-Key"),
    methods: new Set(methods.map((m) => m.toUpperCase())),
    required: optionalBoolean("required", options.required),
    ttl,
    lease,
    maxRequestBytes: nonNegativeInteger(
      "maxRequestBytes",
      options.maxRequestBytes ?? 1_048_576,
    ),
    maxResponseBytes: nonNegativeInteger(
      "maxResponseBytes",
      options.maxResponseBytes ?? 1_048_576,
    ),
    cacheable: optionalFunction("cacheable", options.cacheable) ?? isSuccess,
    fingerprint: optionalFunction("fingerprint", options.fingerprint),
    failOpen: optionalBoolean("failOpen", options.failOpen),
    replayHeader: headerName(
      "replayHeader",
      options.replayHeader ?? "Idempotent-Replayed",
    ),
    unstoredHeaders: headerNames(
      "unstoredHeaders",
      options.unstoredHeaders ?? DEFAULT_UNSTORED,
    ),
    onEvent: optionalFunction("onEvent", options.onEvent),
    completionWait,
    completionTimeout,
    maxPendingCompletions: nonNegativeInteger(
      "maxPendingCompletions",
      options.maxPendingCompletions ?? 100,
    ),
  };
}

/** The default of the `unstoredHeaders` option. */
const DEFAULT_UNSTORED: readonly string[] = Object.freeze(["date"]);

function headerNames(name: string, value: unknown): ReadonlySet<string> {
  if (!Array.isArray(value)) {
    throw new TypeError(
      `'${name}' must be a list of header names: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
  return new Set(value.map((item) => headerName(name, item)));
}

/**
 * Runs a `fingerprint` option and hashes what it returns, so that a store
 * only ever keeps 64 hex characters: never request data, whatever the
 * function returns, and never more than a store's value limit.
 */
async function customFingerprint(
  fingerprint: (request: Request, body: Uint8Array) => string | Promise<string>,
  request: Request,
  body: Uint8Array,
): Promise<string> {
  const value = await fingerprint(request, body);
  if (typeof value !== "string") {
    throw new TypeError(
      `'fingerprint' must return a string: it returned ${value}`,
    );
  }
  // Hashed like a slot: UTF-8 when well formed, UTF-16 code units (under
  // another prefix) when not, so two values never share a fingerprint.
  return value.isWellFormed()
    ? sha256Hex("idempotency-fingerprint\n", value)
    : sha256Hex("idempotency-fingerprint-utf16\n", codeUnits(value));
}

function isSuccess(response: Response): boolean {
  return response.ok;
}

/** One guarded request's way through: claim, run or answer, settle. */
class Guard<A extends unknown[]> {
  #handler: FetchHandler<A>;
  #config: Config;
  #store: IdempotencyStore;
  #heartbeat: Heartbeat;
  /** The writes being retried in the background. */
  #pending = new Set<Promise<void>>();
  /** Resolved when a background write ends, for requests held by backpressure. */
  #room: { promise: Promise<void>; resolve: () => void } | undefined;
  /** How long this instance's claimed requests take to settle: the 409 hint. */
  #settleTime = new SettleEstimate();

  constructor(handler: FetchHandler<A>, config: Config) {
    this.#handler = handler;
    this.#config = config;
    this.#store = config.store;
    this.#heartbeat = new Heartbeat(config.store, config.lease, {
      lost: (beat) =>
        this.#emit(
          () => ({ type: "lease_lost", slot: beat.slot }),
          beat.started,
        ),
      error: (beat, error) =>
        this.#emit(
          () => ({
            type: "store_error",
            slot: beat.slot,
            operation: "extend",
            error,
          }),
          beat.started,
        ),
    });
  }

  async handle(
    request: Request,
    value: string | null,
    args: A,
  ): Promise<Response> {
    const config = this.#config;
    const started = config.onEvent ? performance.now() : 0;
    if (value === null) {
      this.#emit(
        () => ({
          type: "rejected",
          slot: null,
          status: 400,
          reason: "missing",
        }),
        started,
      );
      return problem(
        request,
        400,
        PROBLEM_TYPES.missing,
        "Idempotency key required",
        `This endpoint requires an ${config.header} header.`,
      );
    }
    const parsed = parseIdempotencyKey(value);
    if (!parsed.ok) {
      this.#emit(
        () => ({
          type: "rejected",
          slot: null,
          status: 400,
          reason: "malformed",
        }),
        started,
      );
      return problem(
        request,
        400,
        PROBLEM_TYPES.malformed,
        "Malformed idempotency key",
        `The ${config.header} header is malformed: ${parsed.reason}.`,
      );
    }
    const body = await readBody(request, config.maxRequestBytes);
    if (!(body instanceof Uint8Array)) {
      return this.#unread(request, body, started);
    }
    let scope = "";
    if (config.scope) {
      const found = config.scope(request);
      scope = typeof found === "string" ? found : await found;
      if (typeof scope !== "string") {
        throw new TypeError(
          `'scope' must return a string: it returned ${scope}`,
        );
      }
    }
    const slot = slotOf(scope, parsed.key);
    let fingerprint: string;
    if (config.fingerprint) {
      fingerprint = await customFingerprint(config.fingerprint, request, body);
    } else {
      // The method in upper case: `patch` and `PATCH` are one guarded method.
      const computed = requestFingerprint(
        request.method.toUpperCase(),
        request.url,
        body,
      );
      fingerprint = typeof computed === "string" ? computed : await computed;
    }

    let claim;
    try {
      claim = await this.#store.claim(slot, {
        fingerprint,
        leaseMs: config.lease,
        ttlMs: config.ttl,
      });
    } catch (error) {
      this.#emit(
        () => ({ type: "store_error", slot, operation: "claim", error }),
        started,
      );
      if (config.failOpen) {
        this.#emit(() => ({ type: "fail_open", slot, error }), started);
        return await this.#handler(rebuild(request, body), ...args);
      }
      return problem(
        request,
        503,
        PROBLEM_TYPES.unavailable,
        "Idempotency store unavailable",
        "The request was not processed: its idempotency key could not be checked. Retry it with the same key.",
        STORE_RETRY_SECONDS,
      );
    }

    switch (claim.state) {
      case "completed": {
        if (claim.fingerprint !== fingerprint) {
          return this.#mismatch(request, slot, started);
        }
        const { response } = claim;
        this.#emit(() => ({
          type: "replayed",
          slot,
          status: response.status,
          ...(response.omitted ? { omitted: response.omitted } : {}),
        }), started);
        return replay(response, config.replayHeader, config.unstoredHeaders);
      }
      case "in_flight": {
        if (claim.fingerprint !== null && claim.fingerprint !== fingerprint) {
          return this.#mismatch(request, slot, started);
        }
        const { retryAfterMs } = claim;
        this.#emit(() => ({
          type: "conflict",
          slot,
          retryAfterMs,
          unreadable: claim.fingerprint === null,
        }), started);
        return problem(
          request,
          409,
          PROBLEM_TYPES.inFlight,
          "Request in progress",
          "A request with this idempotency key is being processed. Retry it after it completes to get its response.",
          claim.fingerprint === null
            ? Math.max(1, Math.ceil(retryAfterMs / 1000))
            : this.#settleTime.retryAfterSeconds(
              retryAfterMs,
              // The time since the holder's claim or last renewal.
              Math.max(0, config.lease - retryAfterMs),
            ),
        );
      }
      case "acquired": {
        const { recovered, token } = claim;
        this.#emit(() => ({ type: "claimed", slot, recovered }), started);
        const running = performance.now();
        try {
          return await this.#run(
            rebuild(request, body),
            args,
            slot,
            token,
            started,
          );
        } finally {
          this.#settleTime.observe(performance.now() - running);
        }
      }
    }
  }

  /** Answers a body that was too large (413) or broke mid-read (400). */
  #unread(request: Request, unread: Unread, started: number): Response {
    const config = this.#config;
    if (unread.outcome === "too_large") {
      this.#emit(
        () => ({
          type: "rejected",
          slot: null,
          status: 413,
          reason: "too_large",
        }),
        started,
      );
      return problem(
        request,
        413,
        PROBLEM_TYPES.tooLarge,
        "Request body too large",
        `A request with an ${config.header} may have a body of at most ${config.maxRequestBytes} bytes.`,
      );
    }
    this.#emit(
      () => ({
        type: "rejected",
        slot: null,
        status: 400,
        reason: "incomplete",
        error: unread.error,
      }),
      started,
    );
    return problem(
      request,
      400,
      PROBLEM_TYPES.incomplete,
      "Request body incomplete",
      "The request body could not be read to its end (the upload was cut off, or its framing is invalid). The request was not processed: retry it with the same key.",
    );
  }

  #mismatch(request: Request, slot: string, started: number): Response {
    this.#emit(() => ({ type: "mismatch", slot }), started);
    return problem(
      request,
      422,
      PROBLEM_TYPES.reused,
      "Idempotency key reused",
      "This idempotency key was used for a different request (another method, path, query or body). Use a new key for a new request.",
    );
  }

  async #run(
    request: Request,
    args: A,
    slot: string,
    token: string,
    started: number,
  ): Promise<Response> {
    const beat = this.#heartbeat.start(slot, token, started);
    let response: Response;
    try {
      response = await this.#handler(request, ...args);
    } catch (error) {
      this.#heartbeat.stop(beat);
      await this.#release(slot, token, "thrown", started);
      throw error;
    }
    if (!(response instanceof Response)) {
      this.#heartbeat.stop(beat);
      await this.#release(slot, token, "thrown", started);
      throw new TypeError(
        `The handler must return a Response: it returned ${response}`,
      );
    }
    let cacheable = true;
    try {
      cacheable = this.#config.cacheable(response);
    } catch {
      // A throwing predicate cannot tell: keep the terminal rule's side and record.
    }
    if (!cacheable) {
      this.#heartbeat.stop(beat);
      await this.#release(slot, token, "not_cacheable", started);
      return response;
    }
    // From here the beat is #complete's: it stops it once the record's write
    // has an outcome, which may be after the response was sent.
    return await this.#settle(response, slot, token, beat, started);
  }

  /**
   * The terminal rule: after a cacheable response the slot ends completed,
   * with its body or without it, and the client gets the handler's bytes.
   */
  async #settle(
    response: Response,
    slot: string,
    token: string,
    beat: Beat,
    started: number,
  ): Promise<Response> {
    const { status, statusText } = response;
    const { pairs: headers, partial } = storedHeaders(
      response.headers,
      this.#config.unstoredHeaders,
    );
    const source = response.body;
    if (source === null) {
      await this.#complete(
        slot,
        token,
        { status, headers, body: EMPTY },
        beat,
        started,
      );
      return response;
    }
    const cap = this.#config.maxResponseBytes;
    // A body capture() cannot read (a locked stream) counts as a stream error.
    const captured = await capture(
      source,
      cap,
      this.#heartbeat.capturing(beat),
    ).catch((error) => ({
      outcome: "failed" as const,
      prefix: EMPTY,
      error,
    }));
    // The live response of a captured body reuses the record's header pairs
    // (one pass over the headers, not two) unless the record left some out;
    // a streamed one keeps the handler's headers as they are, Content-Length
    // included.
    const init = { status, statusText, headers: response.headers };
    switch (captured.outcome) {
      case "within":
        await this.#complete(
          slot,
          token,
          {
            status,
            headers,
            body: captured.bytes,
          },
          beat,
          started,
        );
        return new Response(captured.bytes, {
          status,
          statusText,
          headers: partial ? response.headers : headers,
        });
      case "overflow":
        this.#emit(() => ({ type: "overflow", slot, cap }), started);
        await this.#complete(
          slot,
          token,
          {
            status,
            headers,
            body: null,
            omitted: "too_large",
          },
          beat,
          started,
        );
        return new Response(concat(captured.prefix, captured.rest), init);
      case "unfinished":
        await this.#complete(
          slot,
          token,
          {
            status,
            headers,
            body: null,
            omitted: "too_slow",
          },
          beat,
          started,
        );
        return new Response(concat(captured.prefix, captured.rest), init);
      case "failed": {
        const { error } = captured;
        this.#emit(() => ({ type: "body_error", slot, error }), started);
        const omitted: OmittedReason = isAbort(error)
          ? "cancelled"
          : "stream_error";
        await this.#complete(
          slot,
          token,
          {
            status,
            headers,
            body: null,
            omitted,
          },
          beat,
          started,
        );
        return new Response(failAfter(captured.prefix, error), init);
      }
    }
  }

  /**
   * Writes the record; never throws. The common case is one store call. A
   * write that throws is retried until it is `applied` or `lost` (fenced
   * out), or until `completionTimeout`, with the lease renewed all along:
   * inline for up to `completionWait`, then in the background, so that a
   * failed write never hands the slot back to a retry while this process
   * lives. The beat stops at the outcome, not before.
   */
  async #complete(
    slot: string,
    token: string,
    record: StoredResponse,
    beat: Beat,
    started: number,
  ): Promise<void> {
    const write = () => this.#store.complete(slot, token, record);
    let outcome: WriteOutcome;
    try {
      outcome = await write();
    } catch (error) {
      this.#emit(
        () => ({ type: "store_error", slot, operation: "complete", error }),
        started,
      );
      const config = this.#config;
      const failed = performance.now();
      const job = { background: false };
      const task = this.#retry(
        "complete",
        slot,
        write,
        job,
        failed + config.completionTimeout,
        Infinity,
        started,
      ).then(({ outcome, attempts }) => {
        this.#heartbeat.stop(beat);
        this.#completed(slot, record, outcome, attempts, job, started);
      });
      await this.#wait(task, job, failed + config.completionWait);
      return;
    }
    this.#heartbeat.stop(beat);
    this.#completed(slot, record, outcome, 1, INLINE, started);
  }

  #completed(
    slot: string,
    record: StoredResponse,
    outcome: WriteResult,
    attempts: number,
    job: Readonly<Job>,
    started: number,
  ): void {
    this.#emit(() => ({
      type: "completed",
      slot,
      stored: record.body === null ? record.omitted! : "full",
      bytes: record.body?.byteLength ?? 0,
      outcome,
      attempts,
      background: job.background,
    }), started);
  }

  /**
   * Frees the slot; never throws. A release that throws leaves the slot in
   * flight until its lease runs out: retries get 409 meanwhile, never a
   * second run. So it is retried only cheaply: in the background, when there
   * is room, a few times within one lease (after which the slot is free
   * anyway). The response never waits for those retries.
   */
  async #release(
    slot: string,
    token: string,
    reason: "thrown" | "not_cacheable",
    started: number,
  ): Promise<void> {
    const write = () => this.#store.release(slot, token);
    const released = (outcome: WriteResult, attempts: number) =>
      this.#emit(
        () => ({ type: "released", slot, reason, outcome, attempts }),
        started,
      );
    try {
      released(await write(), 1);
      return;
    } catch (error) {
      this.#emit(
        () => ({ type: "store_error", slot, operation: "release", error }),
        started,
      );
    }
    if (this.#pending.size >= this.#config.maxPendingCompletions) {
      released("unknown", 1);
      return;
    }
    const job = { background: true };
    this.#background(
      this.#retry(
        "release",
        slot,
        write,
        job,
        performance.now() + this.#config.lease,
        RELEASE_ATTEMPTS,
        started,
      ).then(({ outcome, attempts }) => released(outcome, attempts)),
    );
  }

  /**
   * Retries a fenced write that threw, with jittered exponential backoff,
   * until it answers, `maxAttempts` were made, or `giveUpAt` (by
   * `performance.now()`) has passed; an attempt still unanswered then is
   * abandoned. Never rejects.
   */
  async #retry(
    operation: "complete" | "release",
    slot: string,
    write: () => Promise<WriteOutcome>,
    job: Job,
    giveUpAt: number,
    maxAttempts: number,
    started: number,
  ): Promise<{ outcome: WriteResult; attempts: number }> {
    let attempts = 1;
    const cap = Math.min(MAX_BACKOFF_MS, Math.max(1, this.#config.lease / 4));
    for (;;) {
      const left = giveUpAt - performance.now();
      if (left <= 0 || attempts >= maxAttempts) {
        return { outcome: "unknown", attempts };
      }
      const ceiling = Math.min(cap, FIRST_BACKOFF_MS * 2 ** (attempts - 1));
      const delayMs = Math.ceil(
        Math.min(left, ceiling / 2 + Math.random() * ceiling / 2),
      );
      attempts++;
      const attempt = attempts;
      this.#emit(() => ({
        type: "write_retry",
        slot,
        operation,
        attempt,
        delayMs,
        background: job.background,
      }), started);
      await timer(delayMs).promise;
      try {
        const deadline = timer(Math.max(0, giveUpAt - performance.now()));
        try {
          const pending = write();
          // An attempt abandoned at the deadline may still fail: not unhandled.
          pending.catch(() => {});
          const outcome = await Promise.race([pending, deadline.promise]);
          if (outcome !== undefined) return { outcome, attempts };
        } finally {
          deadline.cancel();
        }
        return { outcome: "unknown", attempts };
      } catch (error) {
        this.#emit(
          () => ({ type: "store_error", slot, operation, error }),
          started,
        );
      }
    }
  }

  /**
   * Holds the response while `task` runs, until `until` (by
   * `performance.now()`); then moves the task to the background if fewer
   * than `maxPendingCompletions` are there, else keeps waiting until one
   * ends or the task does (backpressure).
   */
  async #wait(task: Promise<void>, job: Job, until: number): Promise<void> {
    let done = false;
    const finished = task.then(() => {
      done = true;
    });
    const left = until - performance.now();
    if (left > 0) {
      const pause = timer(left);
      await Promise.race([finished, pause.promise]);
      pause.cancel();
    }
    while (!done) {
      if (this.#pending.size < this.#config.maxPendingCompletions) {
        job.background = true;
        this.#background(task);
        return;
      }
      await Promise.race([finished, this.#roomFreed()]);
    }
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
    this.#room ??= deferred();
    return this.#room.promise;
  }

  /** Resolves once no write is pending in the background. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all(this.#pending);
  }

  /** Reports an event, built only when someone listens. */
  #emit(
    make: () => DistributiveOmit<IdempotencyEvent, "elapsedMs">,
    started: number | undefined,
  ): void {
    const listener = this.#config.onEvent;
    if (listener === undefined) return;
    try {
      const elapsedMs = started === undefined ? 0 : performance.now() - started;
      listener({ ...make(), elapsedMs } as IdempotencyEvent);
    } catch {
      // A listener's failure must not change the answer.
    }
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K>
  : never;

/** Whether a write being retried has been moved to the background. */
interface Job {
  background: boolean;
}

/** A write that ended at its first attempt, before the response was sent. */
const INLINE: Readonly<Job> = { background: false };
/** The first retry's delay ceiling; each one after doubles it. */
const FIRST_BACKOFF_MS = 20;
/** The longest delay between retries (a quarter lease when that is shorter). */
const MAX_BACKOFF_MS = 2_000;
/** How many times a failed release is tried in all. */
const RELEASE_ATTEMPTS = 4;

/** A promise resolved after `ms`, and a way to cancel its timer. */
function timer(ms: number): { promise: Promise<void>; cancel(): void } {
  let id: ReturnType<typeof setTimeout> | undefined;
  const promise = new Promise<void>((resolve) => {
    id = setTimeout(resolve, ms);
  });
  return { promise, cancel: () => clearTimeout(id) };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => resolve = r);
  return { promise, resolve };
}

/** What {@linkcode readBody} found when it could not return the bytes. */
type Unread = { outcome: "too_large" } | { outcome: "failed"; error: unknown };
const TOO_LARGE: Unread = Object.freeze({ outcome: "too_large" });

/**
 * Reads the request body, counting the bytes the stream yields: at most `max`
 * of them are buffered, whatever `Content-Length` says (a `Request` built in
 * process may declare less than its stream holds). A declared length over
 * the bound is refused without reading. A stream that errors before its end
 * (an upload cut off, broken chunked framing) is `failed`, never a throw.
 *
 * @throws {TypeError} When the body was read before the middleware: a
 * programming error, not the client's.
 */
async function readBody(
  request: Request,
  max: number,
): Promise<Uint8Array<ArrayBuffer> | Unread> {
  if (request.bodyUsed) {
    throw new TypeError(
      "The request body was read before idempotency(): read it in the handler",
    );
  }
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > max && /^\d+$/.test(declared)) {
    await request.body?.cancel().catch(() => {});
    return TOO_LARGE;
  }
  const body = request.body;
  if (body === null) return EMPTY;
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > max) {
        await reader.cancel().catch(() => {});
        return TOO_LARGE;
      }
      chunks.push(value);
    }
  } catch (error) {
    reader.releaseLock();
    return { outcome: "failed", error };
  }
  if (chunks.length === 1 && chunks[0]!.buffer instanceof ArrayBuffer) {
    return chunks[0] as Uint8Array<ArrayBuffer>;
  }
  return concatBytes(chunks, total);
}

/**
 * The request the handler sees: the same URL, method, headers and bytes.
 * Its `signal` is the original's, read only when the handler reads it (under
 * `Deno.serve`, touching a request's signal prints a warning).
 */
function rebuild(request: Request, body: Uint8Array<ArrayBuffer>): Request {
  const forward = new Request(request.url, {
    method: request.method,
    headers: request.headers,
    body: body.byteLength === 0 ? null : body,
    redirect: request.redirect,
  });
  Object.defineProperty(forward, "signal", {
    configurable: true,
    enumerable: true,
    get: () => request.signal,
  });
  return forward;
}

/**
 * A response's headers as a record keeps them: ordered pairs, without the
 * framing headers, the `unstoredHeaders`, and any value `Deno.serve` could
 * not send again (a control character). `partial` says whether anything
 * but framing was left out, so that the live response keeps it.
 */
function storedHeaders(
  headers: Headers,
  unstored: ReadonlySet<string>,
): { pairs: [string, string][]; partial: boolean } {
  const pairs: [string, string][] = [];
  let partial = false;
  for (const pair of headers) {
    const name = pair[0];
    if (UNSTORED.has(name)) continue;
    if (unstored.has(name) || CONTROL.test(pair[1])) partial = true;
    else pairs.push(pair);
  }
  return { pairs, partial };
}

/**
 * A control character other than tab: `Headers` lets them through, but
 * `Deno.serve` (2.9) aborts the process when it writes one, and a record
 * holding one reads as damaged.
 */
// deno-lint-ignore no-control-regex -- matching control characters is the point
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;

/**
 * Builds the replay of a record: same status, headers in order (less the
 * `unstoredHeaders`, whatever the record holds), same bytes.
 */
function replay(
  record: StoredResponse,
  replayHeader: string,
  unstored: ReadonlySet<string>,
): Response {
  const omitted = record.body === null;
  const headers: [string, string][] = [];
  for (const pair of record.headers) {
    const name = pair[0];
    if (name === replayHeader || name === OMITTED_NAME) continue;
    if (omitted && name === "content-encoding") continue;
    if (unstored.has(name)) continue;
    headers.push(pair);
  }
  headers.push([replayHeader, "true"]);
  if (omitted) headers.push([OMITTED_NAME, record.omitted ?? "too_large"]);
  const body = omitted || NULL_BODY.has(record.status)
    ? null
    : record.body as Uint8Array<ArrayBuffer>;
  return new Response(body, { status: record.status, headers });
}

function problem(
  request: Request,
  status: number,
  type: string,
  title: string,
  detail: string,
  retryAfterSeconds?: number,
): Response {
  return problemResponse({
    type,
    title,
    status,
    detail,
    instance: pathOf(request.url),
  }, retryAfterSeconds);
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return "/";
  }
}

/** The live body of an overflow: the prefix, then the rest, cancellation passed on. */
function concat(
  prefix: Uint8Array<ArrayBuffer>,
  rest: ReadableStream<Uint8Array<ArrayBuffer>>,
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let reader: ReadableStreamDefaultReader<Uint8Array<ArrayBuffer>> | undefined;
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    start(controller) {
      if (prefix.byteLength > 0) controller.enqueue(prefix);
    },
    async pull(controller) {
      reader ??= rest.getReader();
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader ? reader.cancel(reason) : rest.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/** The live body of a failed capture: the bytes read, then the same error. */
function failAfter(
  prefix: Uint8Array<ArrayBuffer>,
  error: unknown,
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let sent = false;
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull(controller) {
      if (!sent && prefix.byteLength > 0) {
        sent = true;
        controller.enqueue(prefix);
        return;
      }
      controller.error(error);
    },
  }, { highWaterMark: 0 });
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}

function optionalBoolean(name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") {
    throw new TypeError(
      `'${name}' must be a boolean: current value is ${value}`,
    );
  }
  return value;
}

function optionalFunction<F>(
  name: string,
  value: F | undefined,
): F | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "function") {
    throw new TypeError(
      `'${name}' must be a function: current value is ${value}`,
    );
  }
  return value;
}

function headerName(name: string, value: unknown): string {
  if (
    typeof value !== "string" || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(value)
  ) {
    throw new TypeError(
      `'${name}' must be a header name: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
  return value.toLowerCase();
}
