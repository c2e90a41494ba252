// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode idempotent}: the Idempotency-Key middleware as a Hono
 * middleware.
 *
 * @module
 */

import { Guard } from "./_guard.ts";
import { configure, guardedKey, type IdempotencyOptions } from "./options.ts";

/** Options of {@linkcode idempotent}: the core's, {@linkcode IdempotencyOptions}. */
export type IdempotentHonoOptions = IdempotencyOptions;

/**
 * The part of Hono's `Context` that {@linkcode idempotent} uses. Hono's
 * `Context` fits it, whatever its environment; it is written out so that
 * this module depends on no Hono type.
 */
export interface HonoContextLike {
  /** The request: Hono's `HonoRequest`, of which only `raw` is used. */
  readonly req: { raw: Request };
  /**
   * The response so far (Hono's getter never answers `undefined`). Setting
   * it merges the current one's headers into the new one, unless it was
   * cleared first by setting `undefined`.
   */
  res: Response | undefined;
  /** Whether a response has been set. */
  readonly finalized: boolean;
}

/** Hono's `Next`: runs the middleware and handlers after this one. */
export type HonoNext = () => Promise<void>;

/**
 * The middleware {@linkcode idempotent} makes. It is a Hono
 * `MiddlewareHandler` of any environment: it goes to `app.use` and into a
 * route's handler list.
 */
export type IdempotentMiddleware = (
  c: HonoContextLike,
  next: HonoNext,
) => Promise<void>;

/** Whether the routes after the middleware ran for this request. */
type Downstream = { ran: boolean };

/** Headers of a replay or a problem that earlier middleware must not replace. */
const OWN_HEADERS = new Set(["content-type", "content-length"]);
/** A problem answer also keeps its own caching and retry advice. */
const PROBLEM_HEADERS = new Set([
  ...OWN_HEADERS,
  "cache-control",
  "retry-after",
]);

/**
 * Makes a Hono middleware that runs the routes after it at most once per
 * `Idempotency-Key`: a retry gets the first response back, byte for byte,
 * with `Idempotent-Replayed: true`, and never reaches them; a retry that
 * races the first is answered 409; a key reused for another request is
 * answered 422 (RFC 9457 problem responses). A response that is not
 * cacheable (by default, any non-2xx, Hono's `notFound` and `onError`
 * answers included) releases the key, so that a retry runs the routes again.
 *
 * Requests with another method (`GET`, by default), or without a key while
 * keys are optional, go straight to `next()`: no body read, no store call,
 * so it can sit on a prefix with `app.use("/api/*", idempotent({ scope }))`.
 *
 * How it fits in Hono's context:
 *
 * - The body is read once, and `c.req.raw` is replaced by a request with the
 *   same URL, method, headers and bytes before `next()`, so the routes after
 *   it read it with `c.req.json()`, `c.req.text()` or `c.req.raw`. Register
 *   it before any middleware that reads the body (validators, parsers): a
 *   guarded request whose body an earlier middleware consumed is refused
 *   with a `TypeError` (Hono answers 500 through `onError`), since its bytes
 *   can no longer be fingerprinted.
 * - The response is what the routes after it leave in `c.res`, headers set
 *   before `next()` by earlier middleware included, and it is recorded as
 *   such. The live response keeps its bytes: `c.res` is replaced by one
 *   carrying the same status, headers and body.
 * - A replay or a problem response goes to `c.res` with the headers that
 *   earlier middleware set before `next()` for this request (CORS, a request
 *   id) laid over it, as Hono does for a route's response; their
 *   `Set-Cookie` values are added to the replay's, not put in their place.
 *   Middleware that sets headers after `next()` sees every answer, replays
 *   included.
 *
 * @param options Scope (required: the request it gets is `c.req.raw`), store,
 * limits and hooks, as in the core middleware.
 * @returns The middleware.
 * @throws {TypeError} When `scope` is missing or an option has the wrong type.
 * @throws {RangeError} When a number option is out of range.
 *
 * @example One execution per key, on a prefix
 * ```ts
 * import { Hono } from "hono";
 * import { idempotent } from "@idempotent/http/hono";
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let created = 0;
 * const app = new Hono();
 * app.use(
 *   "/api/*",
 *   idempotent({
 *     store: new MemoryStore(),
 *     // One key space: this example has a single caller. A multi-tenant
 *     // API returns the authenticated user's or client's stable id.
 *     scope: "global",
 *   }),
 * );
 * app.get("/api/orders", (c) => c.json({ created }));
 * app.post("/api/orders", async (c) => {
 *   const { item } = await c.req.json();
 *   return c.json({ id: ++created, item }, 201);
 * });
 *
 * const order = () =>
 *   app.request("/api/orders", {
 *     method: "POST",
 *     headers: { "Idempotency-Key": "cart-7" },
 *     body: JSON.stringify({ item: "tea" }),
 *   });
 * const first = await order();
 * assert.equal(first.status, 201);
 * const retry = await order();
 * assert.equal(retry.status, 201);
 * assert.equal(retry.headers.get("Idempotent-Replayed"), "true");
 * const body = await first.json();
 * assert.deepEqual(body, { id: 1, item: "tea" });
 * assert.deepEqual(await retry.json(), body);
 * assert.deepEqual(await (await app.request("/api/orders")).json(), {
 *   created: 1,
 * });
 * ```
 */
export function idempotent(
  options: IdempotentHonoOptions,
): IdempotentMiddleware {
  const config = configure(options);
  const guard = new Guard(runDownstream, config);

  return async function idempotent(
    c: HonoContextLike,
    next: HonoNext,
  ): Promise<void> {
    const request = c.req.raw;
    const value = guardedKey(config, request);
    if (value !== undefined && request.bodyUsed) {
      throw new TypeError(
        "The request body was read before idempotent(): register body-reading middleware (validators, parsers) after it",
      );
    }
    const downstream: Downstream = { ran: false };
    const response = value === undefined
      ? await runDownstream(request, c, next, downstream)
      : await guard.handle(request, value, [c, next, downstream]);
    if (downstream.ran) {
      // The routes' response, or the same bytes rebuilt after capture: the
      // headers are already merged, so replace `c.res` without merging again.
      if (c.res !== response) {
        c.res = undefined;
        c.res = response;
      }
      return;
    }
    // A replay or a problem, answered without running the routes.
    const upstream = c.res;
    if (upstream !== undefined) {
      const problem = response.headers.get("content-type") ===
        "application/problem+json";
      layHeaders(
        upstream.headers,
        response.headers,
        problem ? PROBLEM_HEADERS : OWN_HEADERS,
      );
    }
    c.res = undefined;
    c.res = response;
  };
}

/** The guarded "handler": the routes after the middleware, on the rebuilt request. */
async function runDownstream(
  request: Request,
  c: HonoContextLike,
  next: HonoNext,
  downstream: Downstream,
): Promise<Response> {
  downstream.ran = true;
  c.req.raw = request;
  await next();
  const response = c.res;
  if (!c.finalized || response === undefined) {
    throw new Error(
      "Context is not finalized after idempotent(): did a route forget to return a Response or to `await next()`?",
    );
  }
  return response;
}

/**
 * Lays the headers earlier middleware set on this request's context over an
 * answer of the middleware's own, as Hono's `c.res` setter does, except
 * that `Set-Cookie` values are added rather than put in the place of the
 * answer's.
 */
function layHeaders(
  from: Headers,
  to: Headers,
  own: ReadonlySet<string>,
): void {
  let cookies: string[] | undefined;
  for (const [name, value] of from) {
    if (own.has(name)) continue;
    if (name === "set-cookie") {
      cookies ??= to.getSetCookie();
      if (!cookies.includes(value)) to.append(name, value);
    } else {
      to.set(name, value);
    }
  }
}
