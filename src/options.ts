// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's options (types and defaults), {@linkcode configure},
 * which checks them into the {@linkcode Config} a guard runs on, and
 * {@linkcode guardedKey}, which tells a guarded request from one that passes
 * through.
 *
 * @module
 */

import type { Clock } from "./_async.ts";
import { HEARTBEAT_CLOCK } from "./_heartbeat.ts";
import {
  headerName,
  headerNames,
  nonNegativeInteger,
  optionalBoolean,
  optionalFunction,
  positiveInteger,
} from "./_validate.ts";
import type { IdempotencyEvent } from "./events.ts";
import type { IdempotencyStore } from "./store.ts";
import { MemoryStore } from "./stores/memory.ts";

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

/**
 * Options of {@linkcode idempotency}. Every field but `scope` is optional.
 */
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
   * record, even with the same key. Required: return the stable id of the
   * user, tenant or API client the request acts for, resolved after
   * authentication (not a token that rotates: a retry must land in the same
   * scope). May be async; a throw propagates as the handler's would.
   * `"global"` is the explicit choice of one key space shared by every
   * caller, for an API that has one (a single-tenant internal service,
   * tests): two callers who send the same key and body then share one
   * execution and its response.
   *
   * @example Scoped by the authenticated account
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * // Your authentication: the account an API key stands for.
   * const accounts = new Map([["key-of-alice", "acct_1"]]);
   * const accountOf = (request: Request) => {
   *   const account = accounts.get(request.headers.get("x-api-key") ?? "");
   *   if (account === undefined) throw new Error("unauthenticated");
   *   return account;
   * };
   *
   * const handler = idempotency(() => new Response("ok", { status: 201 }), {
   *   scope: accountOf,
   * });
   * const res = await handler(new Request("http://localhost/pay", {
   *   method: "POST",
   *   headers: { "idempotency-key": "k1", "x-api-key": "key-of-alice" },
   * }));
   * assert.equal(res.status, 201);
   * ```
   */
  scope: ((request: Request) => string | Promise<string>) | "global";
  /**
   * The request header that carries the key.
   *
   * @default {"Idempotency-Key"}
   */
  header?: string;
  /**
   * The methods the middleware guards, compared in any case (a request sent
   * as `patch` is guarded by `PATCH`); any other is a bare call-through.
   * `CONNECT`, `TRACE` and `TRACK` cannot be guarded (`new Request()`
   * refuses them, and a guarded request is rebuilt for its handler).
   *
   * @default {["POST", "PATCH"]}
   */
  methods?: readonly string[];
  /**
   * Requests of a guarded method that the middleware leaves alone: when it
   * returns `true` the request is a bare call-through, as an unguarded
   * method's (no body read, no store call). It runs on guarded methods
   * only, before the key is looked at; a throw propagates as the handler's
   * would.
   *
   * @default {undefined} (none skipped)
   */
  skip?: (request: Request) => boolean;
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
  /**
   * How long, in milliseconds, a duplicate that arrives while the first
   * request with its key runs waits for it, to get its response (a replay)
   * instead of a 409. 0 answers 409 at once. A duplicate whose first request
   * runs in the same middleware instance is woken by that request's settle
   * and touches no store while it waits; one whose first request runs
   * elsewhere polls the store (one claim per step, with jittered backoff
   * from about 10 ms to 250 ms apart), or is woken by the store's
   * `waitForChange()` when it has one (`KvStore`). If the first request fails (throws,
   * or its response is not cacheable), one waiter takes the key and runs the
   * handler, and the others wait for it. Past the bound, or when the
   * request's `signal` aborts (the client left), the 409 as without waiting.
   * A waiting duplicate reads `request.signal`: under `Deno.serve` that
   * prints a one-time notice, which `--unstable-no-legacy-abort` silences.
   *
   * @default {0}
   */
  waitForInFlight?: number;
  /**
   * How many duplicates may wait at once (`waitForInFlight`) in one
   * middleware instance; past it a duplicate is answered 409 at once.
   *
   * @default {1_000}
   */
  maxWaiting?: number;
}

/** The default of every option that has a value for a default. */
export const DEFAULTS = Object.freeze({
  header: "Idempotency-Key",
  methods: Object.freeze(["POST", "PATCH"]) as readonly string[],
  required: false,
  ttl: 86_400_000,
  lease: 30_000,
  maxRequestBytes: 1_048_576,
  maxResponseBytes: 1_048_576,
  failOpen: false,
  unstoredHeaders: Object.freeze(["date"]) as readonly string[],
  replayHeader: "Idempotent-Replayed",
  completionWait: 1_000,
  completionTimeout: 300_000,
  maxPendingCompletions: 100,
  waitForInFlight: 0,
  maxWaiting: 1_000,
});

/** The options, checked, with their defaults filled in. */
export interface Config {
  store: IdempotencyStore;
  /** `undefined` for `"global"`: the empty scope. */
  scope: Exclude<IdempotencyOptions["scope"], "global"> | undefined;
  /** Lower case. */
  header: string;
  /** Upper case. */
  methods: Set<string>;
  /** The standard methods not in `methods`, as `Request` spells them. */
  unguarded: Set<string>;
  required: boolean;
  ttl: number;
  lease: number;
  maxRequestBytes: number;
  maxResponseBytes: number;
  cacheable: NonNullable<IdempotencyOptions["cacheable"]>;
  fingerprint: IdempotencyOptions["fingerprint"];
  failOpen: boolean;
  /** Lower case. */
  replayHeader: string;
  /** Lower case. */
  unstoredHeaders: ReadonlySet<string>;
  onEvent: IdempotencyOptions["onEvent"];
  completionWait: number;
  completionTimeout: number;
  maxPendingCompletions: number;
  /** The heartbeat's time: the system's unless a test set `[HEARTBEAT_CLOCK]`. */
  heartbeatClock: Clock | undefined;
  /** 0: answer 409 at once. */
  waitForInFlight: number;
  maxWaiting: number;
  skip: IdempotencyOptions["skip"];
}

/**
 * Checks the options and fills in their defaults.
 *
 * @param options What the caller passed.
 * @returns The configuration.
 * @throws {TypeError} When an option has the wrong type.
 * @throws {RangeError} When a number option is out of range, or `lease`
 * exceeds `ttl`, or `completionWait` exceeds `completionTimeout`.
 */
export function configure(options: IdempotencyOptions): Config {
  // Without options (from JavaScript), the `scope` check says what to pass.
  if (options === undefined) options = {} as IdempotencyOptions;
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `'options' must be an object: current value is ${options}`,
    );
  }
  /** Checks an option that has a default, or its default. */
  const option = <T>(
    name: keyof typeof DEFAULTS,
    check: (name: string, value: unknown) => T,
  ): T => check(name, options[name] ?? DEFAULTS[name]);
  const store = options.store ?? new MemoryStore();
  for (const method of ["claim", "complete", "release", "extend"] as const) {
    if (typeof store?.[method] !== "function") {
      throw new TypeError(
        `'store' must implement IdempotencyStore: '${method}' is not a function`,
      );
    }
  }
  const methods = options.methods ?? DEFAULTS.methods;
  const shown = () => JSON.stringify(methods);
  if (
    !Array.isArray(methods) || methods.length === 0 ||
    !methods.every((m) => typeof m === "string" && /^[A-Za-z]+$/.test(m))
  ) {
    throw new TypeError(
      `'methods' must be a non-empty list of method names: current value is ${shown()}`,
    );
  }
  const forbidden = methods.find((m) => FORBIDDEN_METHODS.has(m.toUpperCase()));
  if (forbidden !== undefined) {
    throw new TypeError(
      `'methods' cannot guard ${forbidden}: \`new Request()\` refuses that method, so its handler could never be given the request: current value is ${shown()}`,
    );
  }
  const ttl = option("ttl", positiveInteger);
  const lease = option("lease", positiveInteger);
  if (lease > ttl) {
    throw new RangeError(
      `'lease' must not exceed 'ttl' (${ttl}): current value is ${lease}`,
    );
  }
  const completionWait = option("completionWait", nonNegativeInteger);
  const completionTimeout = option("completionTimeout", positiveInteger);
  if (completionWait > completionTimeout) {
    throw new RangeError(
      `'completionWait' must not exceed 'completionTimeout' (${completionTimeout}): current value is ${completionWait}`,
    );
  }
  const guarded = new Set(methods.map((m) => m.toUpperCase()));
  return {
    store,
    scope: scopeOption(options.scope),
    header: option("header", headerName),
    methods: guarded,
    unguarded: new Set(STANDARD_METHODS.filter((m) => !guarded.has(m))),
    required: option("required", optionalBoolean),
    ttl,
    lease,
    maxRequestBytes: option("maxRequestBytes", nonNegativeInteger),
    maxResponseBytes: option("maxResponseBytes", nonNegativeInteger),
    cacheable: optionalFunction("cacheable", options.cacheable) ?? isSuccess,
    fingerprint: optionalFunction("fingerprint", options.fingerprint),
    failOpen: option("failOpen", optionalBoolean),
    replayHeader: option("replayHeader", headerName),
    unstoredHeaders: option("unstoredHeaders", headerNames),
    onEvent: optionalFunction("onEvent", options.onEvent),
    completionWait,
    completionTimeout,
    maxPendingCompletions: option("maxPendingCompletions", nonNegativeInteger),
    heartbeatClock: (options as { [HEARTBEAT_CLOCK]?: Clock })[
      HEARTBEAT_CLOCK
    ],
    waitForInFlight: option("waitForInFlight", nonNegativeInteger),
    maxWaiting: option("maxWaiting", nonNegativeInteger),
    skip: optionalFunction("skip", options.skip),
  };
}

/**
 * Whether the middleware guards `request`, and with which key: `undefined`
 * when it passes through untouched (a method it does not guard, `skip`, or
 * no key while keys are optional), else the key header's value (`null`: no
 * key, and one is required). It calls `skip` at most once.
 *
 * @param config The middleware's configuration.
 * @param request The incoming request.
 * @returns The key header's value, or `undefined` for a bare call-through.
 */
export function guardedKey(
  config: Config,
  request: Request,
): string | null | undefined {
  // Method names are compared in any case (`fetch` sends `patch` as written
  // and `Deno.serve` passes it on as sent), but an unguarded standard method
  // still costs one lookup: the exact name first.
  const { methods, unguarded, skip } = config;
  const method = request.method;
  if (
    unguarded.has(method) ||
    (!methods.has(method) && !methods.has(method.toUpperCase()))
  ) {
    return undefined;
  }
  if (skip !== undefined && skip(request)) return undefined;
  const value = request.headers.get(config.header);
  return value === null && !config.required ? undefined : value;
}

/** The `scope` option: a function, or `undefined` for `"global"`. */
function scopeOption(scope: unknown): Config["scope"] {
  if (scope === "global") return undefined;
  if (typeof scope === "function") return scope as Config["scope"];
  throw new TypeError(
    `'scope' is required: pass (request) => the stable id of the user, tenant or API client the request acts for (resolved after authentication), or "global" for one key space shared by every caller: current value is ${
      typeof scope === "string" ? JSON.stringify(scope) : scope
    }`,
  );
}

/** What `methods` cannot hold: `new Request()` refuses them (see `methods`). */
const FORBIDDEN_METHODS = new Set(["CONNECT", "TRACE", "TRACK"]);

/** The default of `cacheable`: a 2xx. */
function isSuccess(response: Response): boolean {
  return response.ok;
}

/** The standard methods, in the case `Request` normalizes them to. */
const STANDARD_METHODS =
  "CONNECT DELETE GET HEAD OPTIONS PATCH POST PUT QUERY TRACE".split(" ");
