// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The events the middleware reports through `onEvent`. The library never
 * logs: route these to your logger, metrics or traces.
 *
 * @module
 */

import type { OmittedReason, StoreOperation } from "./store.ts";

/** What every event carries. */
export interface EventBase {
  /** The slot (hex SHA-256 of scope and key), or `null` before it is known. */
  slot: string | null;
  /** Milliseconds since the middleware began on this request. */
  elapsedMs: number;
}

/**
 * The outcome of a store write: `unknown` when the store threw and the
 * write's retries were given up (each throw is also a `store_error`).
 */
export type WriteResult = "applied" | "lost" | "unknown";

/**
 * One thing that happened to one request.
 *
 * - `claimed`: the request owns its slot and the handler runs
 *   (`recovered`: it took over an expired lease).
 * - `replayed`: a completed response was answered again.
 * - `conflict`: 409, a request with this key is in flight
 *   (`unreadable`: the stored value could not be read).
 * - `mismatch`: 422, the key was used for a different request.
 * - `rejected`: 400 (missing or malformed key, or a request body that broke
 *   mid-read: `incomplete`, with the stream's `error`) or 413 (body too
 *   large).
 * - `released`: the slot was freed because the handler threw or its
 *   response is not cacheable (`attempts`: store calls made).
 * - `completed`: the response's record was written, or its write ended
 *   (`stored` says how it was recorded; `outcome` whether it landed;
 *   `attempts`: store calls made; `background`: the response was sent
 *   before the outcome). `lost` after a failed attempt may mean that attempt
 *   landed (the store then fences out the retry).
 * - `write_retry`: a `complete` or `release` that threw is tried again
 *   (`attempt` is the coming attempt's number, after `delayMs`;
 *   `background`: the response was already sent).
 * - `overflow`: the response body was larger than `maxResponseBytes`; it is
 *   streamed to the client in full and recorded without a body.
 * - `body_error`: the response body stream errored after a cacheable status.
 * - `lease_lost`: a heartbeat found that another request took the slot over.
 * - `store_error`: a store operation threw (`operation` says which).
 * - `fail_open`: the store was unreachable and `failOpen` let the handler run
 *   unguarded.
 * - `waiting`: with `waitForInFlight`, a duplicate began to wait for the
 *   request that holds its key (`via`: `owner`, parked until that request,
 *   running in this instance, settles; `poll`, polling the store because it
 *   runs elsewhere).
 * - `woken`: the wait ended because the slot changed: a `replayed` or a
 *   `claimed` follows (`reads`: claims made while waiting, `waitedMs`).
 * - `wait_ended`: the wait gave up: `timed_out` (a 409 follows), `gone`
 *   (the request's `signal` aborted: its client left) or `unreachable` (a
 *   claim while waiting threw: a `store_error` came first, and a 503
 *   follows, or the handler runs unguarded with `failOpen`).
 * - `wait_refused`: `maxWaiting` duplicates were already waiting: 409 at once.
 *
 * @example Count outcomes
 * ```ts
 * import { idempotency, type IdempotencyEvent } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const seen: IdempotencyEvent["type"][] = [];
 * const handler = idempotency(() => new Response("ok"), {
 *   scope: "global", // one key space: this example has one caller
 *   onEvent: (event) => seen.push(event.type),
 * });
 * const post = () => new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "k1" } });
 * await (await handler(post())).text();
 * await (await handler(post())).text();
 * assert.deepEqual(seen, ["claimed", "completed", "replayed"]);
 * ```
 */
export type IdempotencyEvent =
  | EventBase & { type: "claimed"; recovered: boolean }
  | EventBase & { type: "replayed"; status: number; omitted?: OmittedReason }
  | EventBase & { type: "conflict"; retryAfterMs: number; unreadable: boolean }
  | EventBase & { type: "mismatch" }
  | EventBase & {
    type: "rejected";
    status: 400 | 413;
    reason: "missing" | "malformed" | "too_large";
  }
  | EventBase & {
    type: "rejected";
    status: 400;
    reason: "incomplete";
    error: unknown;
  }
  | EventBase & {
    type: "released";
    reason: "thrown" | "not_cacheable";
    outcome: WriteResult;
    attempts: number;
  }
  | EventBase & {
    type: "completed";
    stored: "full" | OmittedReason;
    bytes: number;
    outcome: WriteResult;
    attempts: number;
    background: boolean;
  }
  | EventBase & {
    type: "write_retry";
    operation: "complete" | "release";
    attempt: number;
    delayMs: number;
    background: boolean;
  }
  | EventBase & { type: "overflow"; cap: number }
  | EventBase & { type: "body_error"; error: unknown }
  | EventBase & { type: "lease_lost" }
  | EventBase & {
    type: "store_error";
    operation: StoreOperation;
    error: unknown;
  }
  | EventBase & { type: "fail_open"; error: unknown }
  | EventBase & { type: "waiting"; via: "owner" | "poll" }
  | EventBase & {
    type: "woken";
    via: "owner" | "poll";
    waitedMs: number;
    reads: number;
  }
  | EventBase & {
    type: "wait_ended";
    reason: "timed_out" | "gone" | "unreachable";
    waitedMs: number;
    reads: number;
  }
  | EventBase & { type: "wait_refused"; waiting: number };

/** An event as the middleware makes it: {@linkcode reporter} adds `elapsedMs`. */
export type EventDraft = IdempotencyEvent extends infer E
  ? E extends unknown ? Omit<E, "elapsedMs"> : never
  : never;

/**
 * Reports one event of a request that began at `started` (by
 * `performance.now()`): `make` runs only when someone listens.
 */
export type Report = (make: () => EventDraft, started: number) => void;

/**
 * The middleware's way to report events to an `onEvent` listener: an event
 * is built only when there is one, timed from its request's start, and a
 * listener's throw is ignored (it must not change the answer).
 *
 * @param listener The `onEvent` option.
 * @returns The reporter.
 */
export function reporter(
  listener: ((event: IdempotencyEvent) => void) | undefined,
): Report {
  if (listener === undefined) return () => {};
  return (make, started) => {
    try {
      const elapsedMs = performance.now() - started;
      listener({ ...make(), elapsedMs } as IdempotencyEvent);
    } catch {
      // A listener's failure must not change the answer.
    }
  };
}
