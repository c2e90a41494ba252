// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode inspectKey} and {@linkcode forgetKey}: a store's `peek` and
 * `forget` from a scope and a key (docs/architecture.md, Inspect and forget).
 * @module
 */

import { hasherOf } from "./fingerprint.ts";
import { parseIdempotencyKey } from "./key.ts";
import { SEALED_HEADER } from "./_seal.ts";
import { knownOptions } from "./_validate.ts";
import {
  assertSlot,
  type ForgetResult,
  type IdempotencyStore,
  type PeekResult,
} from "./store.ts";

/**
 * Which record {@linkcode inspectKey} and {@linkcode forgetKey} look for: the
 * key in `scope` (the text a `scope` function returned), or with
 * `global: true` (the `scope: "global"` option); one of the two.
 */
export interface KeyLocation {
  /**
   * The scope as the middleware's `scope` function returned it, taken as
   * text: `"global"` is what a function returning `"global"` hashes.
   */
  scope?: string;
  /** `true` for a middleware with the `scope: "global"` option (the shared key space). */
  global?: true;
  /** The `Idempotency-Key` header's value, as the client sent it. */
  key: string;
  /**
   * The middleware's `secret` option, when it has one: the slot is keyed by it.
   * @default {undefined}
   */
  secret?: string | Uint8Array;
}

/**
 * What {@linkcode inspectKey} found: the slot, then the store's
 * {@linkcode PeekResult}; `sealed: true` when a completed record's headers
 * are the seal's (the `encryption` option: its header names are hidden).
 */
export type KeyInspection = { slot: string; sealed?: true } & PeekResult;

/** What {@linkcode forgetKey} did at the slot. */
export interface KeyForgotten {
  /** The slot the key maps to. */
  slot: string;
  /** The store's answer: `deleted`, or `absent` when nothing live held it. */
  result: ForgetResult;
}

/** The slot the middleware keeps the key under, or the slot given, checked. */
function slotFor(location: KeyLocation | { slot: string }): string {
  if (location && "slot" in location) {
    knownOptions("the slot's location", location, ["slot"]);
    assertSlot(location.slot);
    return location.slot;
  }
  const { scope, global, key, secret } = location ?? {};
  // A misspelt `secret` would hash without it: "absent", the record kept.
  if (location) knownOptions("the key's location", location, LOCATION);
  if (global !== undefined && scope !== undefined) {
    throw new TypeError(
      `give 'scope' (the text the scope function returned) or 'global: true' (the scope: "global" option), not both`,
    );
  }
  if (global !== undefined && global !== true) {
    throw new TypeError(
      `'global' must be true, for the scope: "global" option: current value is ${
        JSON.stringify(global)
      }`,
    );
  }
  if (global === undefined && (typeof scope !== "string" || scope === "")) {
    throw new TypeError(
      `'scope' must be the text the middleware's scope function returned, or pass global: true for the scope: "global" option: current value is ${
        JSON.stringify(scope)
      }`,
    );
  }
  const parsed = parseIdempotencyKey(typeof key === "string" ? key : "");
  if (!parsed.ok) {
    throw new TypeError(
      `'key' is not a key the middleware accepts: ${parsed.reason}`,
    );
  }
  // The option's key space is "" (docs/architecture.md, Scoped hashed slots).
  return hasherOf(secret).slot(global ? "" : scope!, parsed.key);
}

const LOCATION = ["scope", "global", "key", "secret"];

/** Throws a `TypeError` when the store lacks its optional `peek` or `forget`. */
function needs(store: IdempotencyStore, name: "peek" | "forget"): void {
  if (typeof store?.[name] !== "function") {
    throw new TypeError(
      `The store has no ${name}() method: it is optional in IdempotencyStore, and every store of this package has it`,
    );
  }
}

/**
 * Reads, without changing anything, the record that the middleware keeps for
 * `key` within `scope` (or, with `global: true`, under the `scope: "global"`
 * option). `scope: "global"` here is the text a scope function returned, as
 * the middleware hashes it: not the option.
 *
 * @param store The middleware's store.
 * @param location The scope, the key and the `secret`; or the `slot` itself.
 * @returns The slot and what the store holds there.
 * @throws {TypeError} When the store has no `peek()`, or the location is malformed.
 *
 * @example Inspect, then forget, a key
 * ```ts
 * import { forgetKey, idempotency, inspectKey, MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const handler = idempotency(() => new Response("paid", { status: 201 }), {
 *   store,
 *   scope: (req) => req.headers.get("x-account")!,
 * });
 * const pay = () =>
 *   new Request("http://localhost/pay", {
 *     method: "POST",
 *     headers: { "idempotency-key": "order-7", "x-account": "acct-1" },
 *   });
 * await handler(pay());
 * const found = await inspectKey(store, { scope: "acct-1", key: "order-7" });
 * assert.equal(found.state, "completed");
 * if (found.state === "completed") assert.equal(found.status, 201);
 * const forgotten = await forgetKey(store, { scope: "acct-1", key: "order-7" });
 * assert.equal(forgotten.result, "deleted");
 * assert.equal((await inspectKey(store, { scope: "acct-1", key: "order-7" })).state, "absent");
 * ```
 */
export async function inspectKey(
  store: IdempotencyStore,
  location: KeyLocation | { slot: string },
): Promise<KeyInspection> {
  needs(store, "peek");
  const slot = slotFor(location);
  const found = await store.peek!(slot);
  const sealed = found.state === "completed" &&
    found.headerNames.length === 1 && found.headerNames[0] === SEALED_HEADER;
  return sealed ? { slot, sealed, ...found } : { slot, ...found };
}

/**
 * Deletes whatever holds the record of `key` within `scope`, in flight or
 * completed, unfenced: the next request with the key runs the handler, and
 * a handler still running under it loses its completion (`lost`).
 *
 * @param store The middleware's store.
 * @param location The scope, the key and the `secret`; or the `slot` itself.
 * @returns The slot and the store's answer.
 * @throws {TypeError} When the store has no `forget()`, or the location is malformed.
 *
 * @example Forget a key stored under a secret
 * ```ts
 * import { forgetKey, MemoryStore, slotOf } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const secret = "0123456789abcdef0123456789abcdef";
 * const store = new MemoryStore();
 * const slot = slotOf("", "k1", { secret }); // where the middleware keeps it
 * await store.claim(slot, { fingerprint: "f", leaseMs: 1_000, ttlMs: 60_000 });
 * const forgotten = await forgetKey(store, { global: true, key: "k1", secret });
 * assert.deepEqual(forgotten, { slot, result: "deleted" });
 * ```
 */
export async function forgetKey(
  store: IdempotencyStore,
  location: KeyLocation | { slot: string },
): Promise<KeyForgotten> {
  needs(store, "forget");
  const slot = slotFor(location);
  return { slot, result: await store.forget!(slot) };
}
