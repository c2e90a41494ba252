// Copyright 2026 the @idempotent/http authors. MIT license.
/** {@linkcode idempotent}: the Idempotency-Key middleware for Hono. @module */

import { adapt } from "./idempotency.ts";
import type { IdempotencyOptions } from "./options.ts";
import { isProblem } from "./problem.ts";

/** Options of {@linkcode idempotent}: the core's, {@linkcode IdempotencyOptions}. */
export type IdempotentHonoOptions = IdempotencyOptions;

/** The part of Hono's `Context` {@linkcode idempotent} uses, written out. */
export interface HonoContextLike {
  /** The request: Hono's `HonoRequest`, of which only `raw` is used. */
  readonly req: { raw: Request };
  /** The response so far; setting it merges headers unless cleared first. */
  res: Response | undefined;
  /** Whether a response has been set. */
  readonly finalized: boolean;
}

/** Hono's `Next`: runs the middleware and handlers after this one. */
export type HonoNext = () => Promise<void>;

/** What {@linkcode idempotent} makes: a Hono `MiddlewareHandler`. */
export type IdempotentMiddleware = (
  c: HonoContextLike,
  next: HonoNext,
) => Promise<void>;

type Downstream = { ran: boolean };

/** Headers of a replay or a problem that earlier middleware must not replace. */
const OWN_HEADERS = new Set(["content-type", "content-length"]);
const PROBLEM_HEADERS = [...OWN_HEADERS, "cache-control", "retry-after"];

/** A problem's: those, and whatever its renderer set but `Set-Cookie`. */
function problemHeaders(problem: Response): ReadonlySet<string> {
  const own = new Set([...PROBLEM_HEADERS, ...problem.headers.keys()]);
  own.delete("set-cookie");
  return own;
}

/**
 * Makes a Hono middleware that runs the routes after it at most once per
 * `Idempotency-Key`, as `idempotency()` does a handler; other requests go
 * straight to `next()`, so it can sit on a prefix.
 *
 * - `c.req.raw` is replaced by a request with the same bytes. Register it
 *   before any middleware that reads the body: a consumed body is refused
 *   with a `TypeError`.
 * - What the routes leave in `c.res` (earlier middleware's headers
 *   included) is recorded. A replay or a problem gets the headers earlier
 *   middleware set before `next()` laid over it, `Set-Cookie` added.
 *
 * @throws {TypeError} When `scope` is missing or an option has the wrong type.
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
 * // One caller here: see `scope` to scope by account.
 * app.use("/api/*", idempotent({ store: new MemoryStore(), scope: "global" }));
 * app.post("/api/orders", async (c) => {
 *   const { item } = await c.req.json();
 *   return c.json({ id: ++created, item }, 201);
 * });
 *
 * const headers = { "Idempotency-Key": "cart-7" };
 * const body = JSON.stringify({ item: "tea" });
 * const order = () => app.request("/api/orders", { method: "POST", headers, body });
 * const first = await order();
 * const retry = await order();
 * assert.equal(created, 1);
 * assert.equal(retry.status, 201);
 * assert.equal(retry.headers.get("Idempotent-Replayed"), "true");
 * assert.deepEqual(await retry.json(), await first.json());
 * ```
 */
export function idempotent(
  options: IdempotentHonoOptions,
): IdempotentMiddleware {
  const guard = adapt(runDownstream, options);
  const middleware = async function idempotent(
    c: HonoContextLike,
    next: HonoNext,
  ): Promise<void> {
    const request = c.req.raw;
    const value = guard.keyOf(request);
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
      if (c.res === response) return;
    } else if (c.res !== undefined) {
      // A replay or a problem, answered without running the routes.
      const own = isProblem(response) ? problemHeaders(response) : OWN_HEADERS;
      layHeaders(c.res.headers, response.headers, own);
    }
    // Replaced, not merged (Hono's setter merges unless cleared), exposed again.
    c.res = undefined;
    c.res = guard.exposed(request, response);
  };
  guard.drains(middleware);
  return middleware;
}

/** The guarded "handler": the routes after the middleware. */
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

/** Lays `from` over `to` as Hono's `c.res` setter does, `Set-Cookie` added. */
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
