// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The events reported through `onEvent`. The few that mean trouble are also
 * logged, to `console` unless the `logger` option says otherwise. @module
 */

import { type Clock, SYSTEM_CLOCK } from "./_async.ts";
import type { OmittedReason, StoreOperation } from "./store.ts";

/** What every event carries. */
export interface EventBase {
  /** The slot (see `slotOf`), or `null` before it is known. */
  slot: string | null;
  /** Milliseconds since the middleware began on this request. */
  elapsedMs: number;
}

/** A store write's outcome: `unknown` when its retries were given up. */
export type WriteResult = "applied" | "lost" | "unknown";

/**
 * One thing that happened to one request.
 *
 * - `claimed`: the handler runs (`recovered`: an expired lease taken over).
 * - `replayed`: a completed response answered again (`waited`: after a wait).
 * - `conflict`: 409, the key in flight; or, `unreadable`, 500: its value
 *   could not be read (`expiresAt`, when the store's `peek` told: when it
 *   goes, epoch ms; `null`: the store reports no expiry, as Redis for a
 *   value without a TTL, which stays until an operator forgets it).
 * - `mismatch`: 422, the key used for a different request.
 * - `rejected`: 400 (key missing or malformed, body `incomplete`) or 413.
 * - `released`: the slot freed: the handler threw or its response is not cacheable.
 * - `completed`: the record's write ended (`background`: after the response);
 *   `lost` after a failed attempt may mean that attempt landed.
 * - `write_retry`: a `complete` or `release` that threw is tried again.
 * - `overflow`: the body was over `maxResponseBytes`, recorded without it.
 * - `body_error`: the body stream errored after a cacheable status.
 * - `lease_lost`: a heartbeat found the slot taken over.
 * - `store_error`: a store operation threw.
 * - `unavailable`: 503, the store unreachable (after a `store_error`).
 * - `fail_open`: the store was unreachable; `failOpen` ran the handler.
 * - `waiting`: a duplicate waits (`via`: `owner`, in this instance, or `poll`).
 * - `woken`: the slot changed: a `replayed` or `claimed` follows.
 * - `wait_ended`: `timed_out` (409), `gone` (the client left) or
 *   `unreachable` (after a `store_error`: 503, or `failOpen`).
 * - `wait_refused`: `maxWaiting` already waiting: 409.
 * - `option_error`: 500, a `ttl` or `lease` function threw or returned a
 *   value out of range, or a `key` function threw or returned neither a
 *   string nor `undefined` (`error` says which); the handler did not run.
 * - `render_error`: `renderProblem` threw or returned no `Response`; the
 *   RFC 9457 problem was sent (`slot` `null`, `elapsedMs` from the call).
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
  | EventBase & {
    type: "replayed";
    status: number;
    omitted?: OmittedReason;
    waited?: true;
  }
  | EventBase & {
    type: "conflict";
    retryAfterMs: number;
    unreadable: boolean;
    /** A completed record that did not open: why (`encryption`). */
    reason?: string;
    /** The key id its seal names, when it is sealed. */
    keyId?: string;
    /** When an unreadable value expires (epoch ms); `null`: the store reports no expiry. */
    expiresAt?: number | null;
  }
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
  | EventBase & { type: "unavailable"; error: unknown }
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
  | EventBase & { type: "wait_refused"; waiting: number }
  | EventBase & { type: "render_error"; error: unknown }
  | EventBase & { type: "option_error"; error: unknown };

/** An event less the `elapsedMs` {@linkcode reporter} adds. */
export type EventDraft = IdempotencyEvent extends infer E
  ? E extends unknown ? Omit<E, "elapsedMs"> : never
  : never;

/** Reports an event of a request begun at `started`; `make` runs only if someone listens. */
export type Report = (make: () => EventDraft, started: number) => void;

/** A {@linkcode Report} to `listener`, timed on `clock`: events built only when there is one. */
export function reporter(
  listener: ((event: IdempotencyEvent) => void) | undefined,
  clock: Pick<Clock, "now"> = SYSTEM_CLOCK,
): Report {
  if (listener === undefined) return () => {};
  return (make, started) => {
    try {
      const elapsedMs = clock.now() - started;
      listener({ ...make(), elapsedMs } as IdempotencyEvent);
    } catch {
      // A listener's throw must not change the answer.
    }
  };
}
