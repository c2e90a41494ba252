// Copyright 2026 the @idempotent/http authors. MIT license.
/** {@linkcode idempotency}: the middleware. @module */

import { type Config, configure, guardedKey } from "./_configure.ts";
import { Guard, GUARDS } from "./_guard.ts";
import type {
  FetchHandler,
  IdempotencyOptions,
  ServeHandlerInfo,
} from "./options.ts";

export {
  BODY_OMITTED_HEADER,
  HEADERS_OMITTED_HEADER,
  LIFETIME_HEADER,
} from "./_response.ts";
export type {
  FetchHandler,
  IdempotencyOptions,
  Logger,
  ServeHandlerInfo,
} from "./options.ts";

/**
 * Wraps a fetch handler so that a request carrying an `Idempotency-Key` runs
 * it at most once per key: a retry gets the first response back, byte for
 * byte, with `Idempotent-Replayed: true`; one that races the first, 409; a key
 * reused for another request, 422. Other requests go straight through.
 *
 * The handler gets a request with the same bytes and `signal`; a body read
 * before the middleware is a `TypeError`. `req.clone()` and `fetch(req)` drop
 * that signal: pass `signal: req.signal` when you proxy it.
 *
 * @throws {TypeError} When `scope` is missing or an option has the wrong type.
 * @throws {RangeError} When a number option is out of range.
 *
 * @example One execution, one replay
 * ```ts
 * import { idempotency, MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let charges = 0;
 * const handler = idempotency(async (req) => {
 *   charges++;
 *   return Response.json({ charged: (await req.json()).amount }, { status: 201 });
 * }, {
 *   store: new MemoryStore(),
 *   scope: "global", // one caller here: see `scope` to scope by account
 * });
 *
 * const headers = { "idempotency-key": "order-42" };
 * const body = JSON.stringify({ amount: 100 });
 * const pay = () => new Request("http://localhost/pay", { method: "POST", headers, body });
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
  options: IdempotencyOptions,
): FetchHandler<A> {
  if (typeof handler !== "function") {
    throw new TypeError(
      `'handler' must be a function: current value is ${handler}`,
    );
  }
  return guarding(handler, configure(options));
}

/**
 * The handler {@linkcode idempotency} returns, from options already checked:
 * the one way in for a test's clock (`configure(options, clock)`).
 */
export function guarding<A extends unknown[]>(
  handler: FetchHandler<A>,
  config: Config,
): FetchHandler<A> {
  const guard = new Guard(handler, config);
  const idempotent = function idempotent(request: Request, ...args: A) {
    const value = guardedKey(config, request);
    if (value === undefined) return handler(request, ...args);
    return guard.handle(request, value, args);
  };
  GUARDS.set(idempotent, guard);
  return idempotent;
}

/**
 * The seam for adapters whose handler is not a fetch handler (`/hono`'s
 * `idempotent()`; docs/architecture.md, Layout): the options checked and the
 * guard around `handler`, as {@linkcode idempotency} makes them. `keyOf` reads
 * a request's key as it does (`undefined`: pass straight through), `handle`
 * runs the guarded way, `exposed` exposes our headers again once the adapter
 * laid others over them (docs/cors.md), `drains` makes
 * {@linkcode drainCompletions} take the adapter's own function.
 */
export function adapt<A extends unknown[]>(
  handler: FetchHandler<A>,
  options: IdempotencyOptions,
): {
  keyOf(request: Request): string | null | undefined;
  handle(request: Request, key: string | null, args: A): Promise<Response>;
  exposed(request: Request, response: Response): Response;
  drains(entry: (...args: never[]) => unknown): void;
} {
  const config = configure(options);
  const guard = new Guard(handler, config);
  return {
    keyOf: (request) => guardedKey(config, request),
    handle: (request, key, args) => guard.handle(request, key, args),
    exposed: (request, response) => guard.exposed(request, response),
    drains: (entry) => void GUARDS.set(entry, guard),
  };
}

/**
 * Waits until every record write the handler (from {@linkcode idempotency},
 * or a middleware from `/hono`'s `idempotent()`) retries in the background has ended, later ones too: call it at shutdown,
 * once the server stopped taking requests.
 *
 * @example Flush before exit
 * ```ts
 * import { drainCompletions, idempotency } from "@idempotent/http";
 *
 * const handler = idempotency(() => new Response("ok"), { scope: "global" });
 * // Deno.serve(...).shutdown() first, then:
 * await drainCompletions(handler);
 * ```
 */
export function drainCompletions(
  handler: (...args: never[]) => unknown,
): Promise<void> {
  const guard = typeof handler === "function" ? GUARDS.get(handler) : undefined;
  if (guard === undefined) {
    return Promise.reject(
      new TypeError(
        `'handler' must be a handler returned by idempotency() or a middleware returned by idempotent() (/hono): current value is ${handler}`,
      ),
    );
  }
  return guard.drain();
}
