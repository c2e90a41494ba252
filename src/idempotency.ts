// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode idempotency}: the middleware.
 *
 * @module
 */

import { Guard } from "./_guard.ts";
import { configure } from "./_options.ts";
import type { IdempotencyEvent } from "./events.ts";
import type { IdempotencyStore } from "./store.ts";

export { BODY_OMITTED_HEADER } from "./_response.ts";

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
  const skip = config.skip;
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
    if (skip !== undefined && skip(request)) return handler(request, ...args);
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
