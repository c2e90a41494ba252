// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode inspectKey} and {@linkcode forgetKey}: a store's `peek` and
 * `forget` from a scope and a key (docs/architecture.md, Inspect and forget).
 * @module
 */

import { hasherOf } from "./fingerprint.ts";
import { parseIdempotencyKey } from "./key.ts";
import type { IdempotencyOptions } from "./options.ts";
import { isSealed, Sealer, sealLabel } from "./_seal.ts";
import { assertMethod, knownOptions } from "./_validate.ts";
import {
  assertSlot,
  type ForgetResult,
  type IdempotencyStore,
  type PeekResult,
  type StoredResponse,
  type StoreStats,
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
  /**
   * The middleware's `encryption` option (for instance from
   * `importEncryptionKeys`): {@linkcode inspectKey} opens a sealed record with
   * it, as the middleware would. {@linkcode forgetKey} needs no key.
   * @default {undefined} (a sealed record is reported sealed, unverified)
   */
  encryption?: IdempotencyOptions["encryption"];
}

/** A record named by its slot, as the middleware's events give it. */
export interface SlotLocation {
  /** The slot itself. */
  slot: string;
  /** As in {@linkcode KeyLocation.encryption}. */
  encryption?: IdempotencyOptions["encryption"];
}

/**
 * What {@linkcode inspectKey} found: the slot, then the store's
 * {@linkcode PeekResult}. A sealed record has `sealed: true` and `keyId`
 * (its seal's). Given the keys, one that opens is `completed`, `verified:
 * true`, its header names and body length revealed; one the middleware would
 * not open is `unreadable`, `verified: false`, with `reason`. Without the
 * keys it stays `completed`, `verified: false`.
 */
export type KeyInspection =
  & {
    slot: string;
    sealed?: true;
    verified?: boolean;
    keyId?: string;
    reason?: string;
  }
  & PeekResult;

/** What {@linkcode forgetKey} did at the slot. */
export interface KeyForgotten {
  /** The slot the key maps to. */
  slot: string;
  /** The store's answer: `deleted`, or `absent` when nothing live held it. */
  result: ForgetResult;
}

/**
 * The slot {@linkcode inspectKey} and {@linkcode forgetKey} look at for
 * `location`: where the middleware keeps the key (the scope, the key and the
 * secret, checked as the middleware checks them), or the slot given, checked.
 *
 * @throws {TypeError} When the location is malformed, naming the field.
 *
 * @example The slot an event names, from the key
 * ```ts
 * import { locateSlot } from "@idempotent/http/inspect";
 * import { slotOf } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * assert.equal(locateSlot({ scope: "acct-1", key: "order-7" }), slotOf("acct-1", "order-7"));
 * assert.throws(() => locateSlot({ scope: "", key: "order-7" }), TypeError);
 * ```
 */
export function locateSlot(location: KeyLocation | SlotLocation): string {
  if (location && "slot" in location) {
    knownOptions("the slot's location", location, ["slot", "encryption"]);
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

const LOCATION = ["scope", "global", "key", "secret", "encryption"];

/** Throws a `TypeError` when the store lacks its optional `peek` or `forget`. */
function needs(store: unknown, name: "peek" | "forget" | "stats"): void {
  assertMethod(
    store,
    name,
    `The store has no ${name}() method: it is optional in IdempotencyStore, and every store of this package has it`,
  );
}

/**
 * Reads, without changing anything, the record that the middleware keeps for
 * `key` within `scope` (or, with `global: true`, under the `scope: "global"`
 * option). `scope: "global"` here is the text a scope function returned, as
 * the middleware hashes it: not the option.
 *
 * @param store The middleware's store.
 * @param location The scope, the key and the `secret`; or the `slot` itself;
 * and the `encryption` option to open a sealed record with.
 * @returns The slot and what the store holds there.
 * @throws {TypeError} When the store has no `peek()`, or the location is malformed.
 *
 * @example Inspect, then forget, a key
 * ```ts
 * import { idempotency, MemoryStore } from "@idempotent/http";
 * import { forgetKey, inspectKey } from "@idempotent/http/inspect";
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
  location: KeyLocation | SlotLocation,
): Promise<KeyInspection> {
  needs(store, "peek");
  const slot = locateSlot(location);
  const sealer = Sealer.of(location.encryption); // its TypeError first
  const found = await store.peek!(slot, { response: true });
  if (found.state !== "completed") return { slot, ...found };
  const { response, ...peeked } = found;
  const sealed = isSealed(peeked.headerNames);
  const keyId = response && sealLabel(response)?.keyId;
  const seal = sealed
    ? { sealed, ...(keyId === undefined ? {} : { keyId }) }
    : {};
  if (sealer === undefined) {
    return sealed
      ? { slot, ...seal, verified: false, ...peeked }
      : { slot, ...peeked };
  }
  const { expiresAt } = peeked;
  if (response === undefined) {
    const reason = "the store's peek() gave no record to open";
    return { slot, ...seal, verified: false, reason, ...peeked };
  }
  const opened = await sealer.read(slot, peeked.fingerprint, response);
  if (opened.record === null) {
    const { reason } = opened;
    return {
      slot,
      ...seal,
      verified: false,
      reason,
      state: "unreadable",
      expiresAt,
    };
  }
  return {
    slot,
    ...seal,
    verified: true,
    ...peeked,
    ...revealed(opened.record),
  };
}

/** What a record that opened shows of itself. */
function revealed(record: StoredResponse) {
  return {
    headerNames: record.headers.map(([name]) => name),
    bodyBytes: record.body?.byteLength ?? null,
  };
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
 * import { MemoryStore, slotOf } from "@idempotent/http";
 * import { forgetKey } from "@idempotent/http/inspect";
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
  location: KeyLocation | SlotLocation,
): Promise<KeyForgotten> {
  needs(store, "forget");
  const slot = locateSlot(location);
  return { slot, result: await store.forget!(slot) };
}

/** What {@linkcode inspectStats} counts, besides the store's. */
export interface StatsOptions {
  /** As the store's `stats({ limit })`: records a scan reads at most. */
  limit?: number;
  /** The middleware's `encryption` option: records it would not open count as unreadable. */
  encryption?: IdempotencyOptions["encryption"];
}

/**
 * What {@linkcode inspectStats} counted: the store's counts; with the keys,
 * `completed` only the records sealed under a key id given, and
 * `unreadable` also the completed records the middleware would not open
 * (`unopened` of them: sealed under a key id not given, or in clear).
 * `verified: false` when the store does not count seals by key id.
 */
export type RecordStats = StoreStats & { unopened?: number; verified?: false };

/**
 * Counts a store's records by state (its `stats()`), and with `encryption`
 * counts as unreadable the completed records the middleware would not open:
 * those sealed under a key id not listed, and those in clear. It reads each
 * seal's key id, not the seal: a record altered under a listed key still
 * counts as completed (`inspectKey` opens one).
 *
 * @param store The middleware's store.
 * @param options The scan's `limit`, and the `encryption` option.
 * @returns The counts.
 * @throws {TypeError} When the store has no `stats()`, or `encryption` is malformed.
 *
 * @example Records sealed under a key the app no longer lists
 * ```ts
 * import { idempotency, importEncryptionKeys, MemoryStore } from "@idempotent/http";
 * import { inspectStats } from "@idempotent/http/inspect";
 * import assert from "node:assert/strict";
 *
 * const key = (byte: number) => btoa(String.fromCharCode(...new Uint8Array(32).fill(byte)));
 * const store = new MemoryStore();
 * const old = await importEncryptionKeys(`k1:${key(1)}`);
 * const handler = idempotency(() => new Response("paid"), { scope: "global", store, encryption: old });
 * const post = new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "a" } });
 * await (await handler(post)).text();
 * const rotated = await importEncryptionKeys(`k2:${key(2)}`); // k1 dropped
 * const stats = await inspectStats(store, { encryption: rotated });
 * assert.equal(stats.completed, 0);
 * assert.equal(stats.unreadable, 1);
 * ```
 */
export async function inspectStats(
  store: Pick<IdempotencyStore, "stats">,
  options: StatsOptions = {},
): Promise<RecordStats> {
  needs(store, "stats");
  knownOptions("inspectStats()", options, ["limit", "encryption"]);
  const sealer = Sealer.of(options.encryption);
  const { limit } = options;
  const stats = await store.stats!(limit === undefined ? {} : { limit });
  if (sealer === undefined) return stats;
  if (stats.sealed === undefined) return { ...stats, verified: false };
  let opens = 0;
  for (const [id, n] of Object.entries(stats.sealed)) {
    if (sealer.holds(id)) opens += n;
  }
  const unopened = stats.completed - opens;
  return {
    ...stats,
    completed: opens,
    unreadable: stats.unreadable + unopened,
    unopened,
  };
}
