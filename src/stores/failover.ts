// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A store made of two: {@linkcode FailoverStore} serves from a primary
 * (typically a `RedisStore`) while it is reachable, falls back to a second
 * store (typically a `PostgresStore`) when it is not, and consults the
 * fallback on every primary miss, so that a record written during an outage
 * is still honoured after the primary comes back.
 *
 * Choose it when Redis is your store of record for speed but an outage of
 * Redis must neither stop the service (503 on every keyed request) nor, once
 * Redis is back (possibly empty), let a retry run a handler a second time.
 * When one store is enough, use that store: this one costs a round trip to
 * each store for every fresh key.
 *
 * @example Redis first, PostgreSQL as the fallback
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { FailoverStore } from "@idempotent/http/failover";
 * import { RedisStore } from "@idempotent/http/redis";
 * import { PostgresStore } from "@idempotent/http/postgres";
 * import { createClient } from "redis";
 * import postgres from "postgres";
 *
 * // Fail fast while Redis is down: no offline queue, a short timeout.
 * const client = createClient({ url: "redis://127.0.0.1:6379", disableOfflineQueue: true });
 * client.on("error", () => {});
 * await client.connect();
 * const sql = postgres("postgres://postgres@127.0.0.1:5432/app");
 *
 * const store = new FailoverStore({
 *   primary: new RedisStore({ client, timeoutMs: 250 }),
 *   fallback: new PostgresStore({ sql }),
 *   onEvent: (event) => console.warn("idempotency failover", event.type, event.slot),
 * });
 * await store.migrate(); // creates the PostgreSQL table; throws if PostgreSQL refuses
 * Deno.serve(idempotency(() => new Response("charged", { status: 201 }), { store }));
 * ```
 *
 * @example Drive the middleware (two MemoryStores stand in for Redis and PostgreSQL)
 * ```ts
 * import { idempotency, MemoryStore } from "@idempotent/http";
 * import { FailoverStore } from "@idempotent/http/failover";
 * import assert from "node:assert/strict";
 *
 * let runs = 0;
 * const store = new FailoverStore({ primary: new MemoryStore(), fallback: new MemoryStore() });
 * const handler = idempotency(() => {
 *   runs++;
 *   return new Response("charged", { status: 201 });
 * }, { store });
 * const request = () =>
 *   new Request("http://localhost/charges", {
 *     method: "POST",
 *     headers: { "Idempotency-Key": "c-1" },
 *     body: "{}",
 *   });
 * assert.equal((await handler(request())).status, 201);
 * const retry = await handler(request());
 * assert.equal(retry.headers.get("Idempotent-Replayed"), "true");
 * assert.equal(runs, 1);
 * ```
 *
 * @module
 */

import {
  assertSlot,
  type ClaimOptions,
  claimOptions,
  type ClaimResult,
  durationMs,
  type IdempotencyStore,
  type StoredResponse,
  StoreError,
  type StoreOperation,
  type WriteOutcome,
} from "../store.ts";
export * from "./_contract.ts";

/** One of the two stores of a {@linkcode FailoverStore}. */
export type FailoverRole = "primary" | "fallback";

/**
 * What a {@linkcode FailoverStore} reports through
 * {@linkcode FailoverStoreOptions.onEvent}. None of them changes an answer;
 * they are for logs, metrics and alerts.
 *
 * - `fallback`: the primary threw on a claim (it is unreachable), so the
 *   claim went to the fallback alone. `error` is the primary's.
 * - `recovered`: on a primary miss, the fallback held a completed record (one
 *   written during an outage, or the mirror of a record the primary lost in
 *   a restart): the claim answers it, and it was copied into the primary when
 *   `copied` is `true` (not when the fingerprints differ, or the copy failed).
 *   Also on a primary `in_flight` (a claim of the outage that landed late)
 *   while the fallback holds the completed record, with `copied: false`.
 * - `fallback_unavailable`: the primary answered a miss but the fallback threw;
 *   without `strict`, and once the fallback has answered at least once, the
 *   claim is granted on the primary alone (a record written to the fallback
 *   during an earlier primary outage is not seen for this claim); before
 *   that, the claim is refused (see {@linkcode FailoverStore}).
 * - `write_failed`: one of the two stores threw on a write that went to both
 *   (or on a best-effort write of the store itself: a copy or a release);
 *   the other store's answer stands.
 * - `diverged`: a write that went to both stores was applied by one and lost
 *   by the other. The fallback's answer is the store's answer (see
 *   {@linkcode FailoverStore.complete}).
 *
 * @example Count the claims served during an outage
 * ```ts
 * import type { FailoverEvent } from "@idempotent/http/failover";
 * import assert from "node:assert/strict";
 *
 * const counts = new Map<FailoverEvent["type"], number>();
 * const onEvent = (event: FailoverEvent) => counts.set(event.type, (counts.get(event.type) ?? 0) + 1);
 * onEvent({ type: "fallback", operation: "claim", slot: "s", error: new Error("ECONNREFUSED") });
 * assert.equal(counts.get("fallback"), 1);
 * ```
 */
export type FailoverEvent =
  | { type: "fallback"; operation: "claim"; slot: string; error: unknown }
  | { type: "recovered"; slot: string; copied: boolean }
  | {
    type: "fallback_unavailable";
    operation: "claim";
    slot: string;
    error: unknown;
  }
  | {
    type: "write_failed";
    operation: StoreOperation;
    store: FailoverRole;
    slot: string;
    error: unknown;
  }
  | {
    type: "diverged";
    operation: Exclude<StoreOperation, "claim">;
    slot: string;
    primary: WriteOutcome;
    fallback: WriteOutcome;
  };

/** Options of the {@linkcode FailoverStore} constructor. */
export interface FailoverStoreOptions {
  /**
   * The fast store that serves while it is reachable, such as a
   * `RedisStore`. Give it a short timeout (and, on node-redis, no offline
   * queue): every claim waits for the primary to fail before it falls back.
   */
  primary: IdempotencyStore;
  /**
   * The durable store that serves while the primary is unreachable and is
   * consulted on every primary miss, such as a `PostgresStore`. Run
   * {@linkcode FailoverStore.migrate} at boot to create its table: until the
   * fallback has answered once, a claim it cannot serve is refused.
   */
  fallback: IdempotencyStore;
  /**
   * Whether a claim fails (the middleware answers 503) when the primary
   * misses and the fallback cannot be reached. When `false`, the claim is
   * granted on the primary alone and a `fallback_unavailable` event is
   * reported: a record that only the fallback holds (written during an
   * earlier primary outage) is not seen for that claim. Either way, a
   * fallback that has never answered (its table missing, a wrong URL) makes
   * the claim fail: `false` tolerates an outage, not a misconfiguration.
   *
   * @default {false}
   */
  strict?: boolean;
  /**
   * Receives every {@linkcode FailoverEvent}. It is called synchronously;
   * whatever it throws is ignored.
   */
  onEvent?: (event: FailoverEvent) => void;
}

/** A decoded token: which stores issued it, and their tokens. */
type Route =
  | { kind: "p"; primary: string }
  | { kind: "f"; fallback: string }
  | { kind: "b"; primary: string; fallback: string };

// Tokens: "p:<primary>", "f:<fallback>", "b:<plen>.<flen>:<primary><fallback>".
// Both lengths are written, and must add up exactly, so a token with
// anything appended or cut off is malformed (every write `lost`) rather than
// the primary's real token followed by a wrong fallback token.
const B_TOKEN = /^b:(\d{1,6})\.(\d{1,6}):/;

function route(token: unknown): Route | null {
  if (typeof token !== "string" || token.length < 3 || token[1] !== ":") {
    return null;
  }
  const kind = token[0];
  if (kind === "p") return { kind, primary: token.slice(2) };
  if (kind === "f") return { kind, fallback: token.slice(2) };
  if (kind !== "b") return null;
  const match = B_TOKEN.exec(token);
  if (match === null) return null;
  const p = Number(match[1]);
  const f = Number(match[2]);
  const start = match[0].length;
  if (p === 0 || f === 0 || token.length !== start + p + f) return null;
  return {
    kind,
    primary: token.slice(start, start + p),
    fallback: token.slice(start + p),
  };
}

function both(primary: string, fallback: string): string {
  return `b:${primary.length}.${fallback.length}:${primary}${fallback}`;
}

function assertStore(name: string, store: unknown): void {
  const s = store as Record<string, unknown> | null | undefined;
  for (const method of ["claim", "complete", "release", "extend"]) {
    if (typeof s?.[method] !== "function") {
      throw new TypeError(
        `'${name}' must be an IdempotencyStore: it has no ${method}() method`,
      );
    }
  }
}

/** What one store did with a write: its outcome, or the error it threw. */
type Settled = { ok: true; value: WriteOutcome } | {
  ok: false;
  error: unknown;
};

function settle(write: () => Promise<WriteOutcome>): Promise<Settled> {
  let pending: Promise<WriteOutcome>;
  try {
    pending = write();
  } catch (error) {
    return Promise.resolve({ ok: false, error });
  }
  return pending.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
}

/**
 * An {@linkcode IdempotencyStore} on two stores: a primary that serves while
 * it is reachable, and a fallback that serves while it is not and is
 * consulted, atomically, on every primary miss.
 *
 * **Claims.**
 * 1. The primary claims. If it throws (it is unreachable), the fallback
 *    claims alone (event `fallback`); if the fallback throws too, the claim
 *    throws a {@linkcode StoreError} whose cause is an `AggregateError` of
 *    both errors.
 * 2. A primary `completed` is the answer: the primary is the source of
 *    truth while it is up. One round trip.
 * 3. A primary `in_flight` asks the fallback (a claim, like every fallback
 *    look-up): a primary claim can be an orphan, a claim that timed out
 *    during an outage and landed when the primary came back, while the key
 *    ran and completed through the fallback. A fallback `completed` is the
 *    answer (event `recovered`, nothing copied: the primary's slot is not
 *    ours); anything else leaves the primary's `in_flight`, and a fallback
 *    claim made by the look-up is released at once. This costs a fallback
 *    round trip (two when it acquires) on 409s only, which are rare, and
 *    closes the gap for every instance, not only the one that served the
 *    key in the outage. A `RedisStore` also undoes such a late claim itself
 *    as soon as its reply comes back.
 * 4. A primary miss (`acquired`) claims the fallback too, with the same
 *    options. A claim, not a read: of two instances that disagree on whether
 *    the primary is up, whichever claims the fallback first wins, so no key
 *    runs twice in a split brain.
 *    - fallback `acquired`: the caller owns the slot in both stores.
 *    - fallback `completed`: a record written during an outage, or the mirror
 *      of one the primary lost. It is the answer, and it is copied into the
 *      primary (event `recovered`) when the fingerprints match, so that the
 *      next retry is served by the primary alone.
 *    - fallback `in_flight`: someone owns the slot through the fallback; the
 *      primary claim is released and the fallback's answer returned.
 *    - fallback throws: with `strict`, or while the fallback has never
 *      answered, the primary claim is released and the claim throws;
 *      otherwise the slot is granted on the primary alone (event
 *      `fallback_unavailable`).
 *
 * **A fallback that does not work is loud.** A fallback that cannot serve
 * (a PostgreSQL table that was never created, a wrong database) would
 * otherwise look like an outage that never ends: every new key served by
 * the primary alone, every answer right, and no durable copy anywhere.
 * So the leniency of `strict: false` starts only once the fallback has
 * answered once (a claim of any outcome, or {@linkcode FailoverStore.migrate}
 * resolving): before that, a primary miss that the fallback cannot claim
 * throws a {@linkcode StoreError} (503 through the middleware) whose message
 * says to run `migrate()`. Call `await store.migrate()` at boot: it creates
 * the fallback's table (and the primary's, when it has a `migrate()`) and
 * throws when the fallback refuses, so a misconfiguration stops the deploy
 * instead of surfacing in production. A process that boots while the
 * fallback is down answers 503 to new keys until it is back. A fallback that
 * breaks after it has answered (its table dropped) cannot be told from an
 * outage: watch the `fallback_unavailable` events.
 *
 * **Writes.** The token says which stores issued it (`p:`, `f:` or `b:`),
 * and each write goes to those stores only, never a token to the store that
 * did not issue it; a malformed or foreign token makes every write `lost`.
 * A slot owned in both stores is completed, released and extended in both,
 * in parallel: the fallback keeps a durable mirror, so a primary that
 * restarts empty never causes a second execution.
 *
 * **Costs**, in round trips: a fresh key is one claim on each store (in
 * sequence) and one complete on each (in parallel), plus lease renewals on
 * both for slow handlers; a replay is one primary round trip, a conflict
 * (409) one claim on each store; during a primary outage every claim waits for the primary to fail (give it
 * a short timeout and no offline queue), then goes to the fallback, and the
 * writes of its `f:` token go to the fallback alone; the first retry after
 * recovery of a key first seen in the outage costs the two claims plus the
 * copy, and later retries one primary round trip again.
 *
 * **Double faults** it does not cover: a record completed while the fallback
 * was unreachable (a `p:` claim, or a `b:` complete whose fallback write
 * threw) lives in the primary alone, and is gone if the primary then
 * restarts empty.
 *
 * **Scoping** is identical in both stores: both key by the same slot, which
 * the middleware derives from the scope and the key, so two tenants never
 * meet in the fallback.
 *
 * **TTL.** A record copied into the primary on recovery gets a new TTL window
 * in the primary (the store contract carries no deadline to copy), so it may
 * be replayed for up to the length of the outage past the first claim's
 * window; the fallback keeps the original deadline.
 *
 * @example Serve through the fallback while the primary is down, and recover
 * ```ts
 * import { MemoryStore, type IdempotencyStore } from "@idempotent/http";
 * import { FailoverStore, type FailoverEvent } from "@idempotent/http/failover";
 * import assert from "node:assert/strict";
 *
 * let down = true;
 * const redis = new MemoryStore();
 * // A primary that throws while `down`, as an unreachable Redis would.
 * const primary: IdempotencyStore = {
 *   claim: (slot, options) => down ? Promise.reject(new Error("ECONNREFUSED")) : redis.claim(slot, options),
 *   complete: (slot, token, response) => redis.complete(slot, token, response),
 *   release: (slot, token) => redis.release(slot, token),
 *   extend: (slot, token, leaseMs) => redis.extend(slot, token, leaseMs),
 * };
 * const events: FailoverEvent["type"][] = [];
 * const store = new FailoverStore({
 *   primary,
 *   fallback: new MemoryStore(),
 *   onEvent: (event) => events.push(event.type),
 * });
 * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 86_400_000 };
 *
 * const claim = await store.claim("slot-1", options); // the primary is down
 * assert.equal(claim.state, "acquired");
 * if (claim.state === "acquired") {
 *   assert.ok(claim.token.startsWith("f:"));
 *   await store.complete("slot-1", claim.token, { status: 201, headers: [], body: new Uint8Array([1]) });
 * }
 * down = false; // the primary is back, and has never seen slot-1
 * assert.equal((await store.claim("slot-1", options)).state, "completed");
 * assert.deepEqual(events, ["fallback", "recovered"]);
 * assert.equal((await redis.claim("slot-1", options)).state, "completed"); // copied
 * ```
 */
export class FailoverStore implements IdempotencyStore {
  #primary: IdempotencyStore;
  #fallback: IdempotencyStore;
  #strict: boolean;
  #onEvent: ((event: FailoverEvent) => void) | undefined;
  /** Whether the fallback has answered once: only then is `strict: false` lenient. */
  #fallbackAnswered = false;

  /**
   * Makes a store on two stores the caller made; it never connects or closes
   * them.
   *
   * @param options The primary, the fallback, `strict` and `onEvent`.
   * @throws {TypeError} When `primary` or `fallback` is not a store, `strict`
   * is not a boolean, or `onEvent` is not a function.
   */
  constructor(options: FailoverStoreOptions) {
    assertStore("primary", options?.primary);
    if (options.fallback === undefined || options.fallback === null) {
      throw new TypeError(
        "'fallback' is required: a FailoverStore without a fallback is its primary alone; pass the durable store (such as a PostgresStore), or use the primary directly",
      );
    }
    assertStore("fallback", options.fallback);
    if (options.primary === options.fallback) {
      throw new TypeError(
        "'primary' and 'fallback' must be two different stores: the same store was passed twice",
      );
    }
    const strict = options.strict ?? false;
    if (typeof strict !== "boolean") {
      throw new TypeError(
        `'strict' must be a boolean: current value is ${strict}`,
      );
    }
    const onEvent = options.onEvent;
    if (onEvent !== undefined && typeof onEvent !== "function") {
      throw new TypeError(
        `'onEvent' must be a function: current value is ${onEvent}`,
      );
    }
    this.#primary = options.primary;
    this.#fallback = options.fallback;
    this.#strict = strict;
    this.#onEvent = onEvent;
  }

  /**
   * Prepares both stores: runs the fallback's `migrate()` (a
   * `PostgresStore` creates its schema, table and index), then the
   * primary's, for each store that has one. Run it once at boot, from every
   * instance if you like (each store's migration is safe to run
   * concurrently). When it resolves, the fallback counts as working (see
   * the class documentation).
   *
   * @returns When both stores are ready.
   * @throws {Error} What a store's `migrate()` throws (PostgreSQL unreachable,
   * no privilege): the fallback does not work, so do not start serving.
   *
   * @example Migrate at boot (two MemoryStores need no migration)
   * ```ts
   * import { MemoryStore } from "@idempotent/http";
   * import { FailoverStore } from "@idempotent/http/failover";
   * import assert from "node:assert/strict";
   *
   * const store = new FailoverStore({ primary: new MemoryStore(), fallback: new MemoryStore() });
   * await store.migrate();
   * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };
   * assert.equal((await store.claim("slot-1", options)).state, "acquired");
   * ```
   *
   * @example A fallback that never answered refuses the claim, loudly
   * ```ts
   * import { MemoryStore, type IdempotencyStore, StoreError } from "@idempotent/http";
   * import { FailoverStore } from "@idempotent/http/failover";
   * import assert from "node:assert/strict";
   *
   * const missingTable: IdempotencyStore = {
   *   claim: () => Promise.reject(new Error('relation "idempotency_keys" does not exist')),
   *   complete: () => Promise.resolve("lost"),
   *   release: () => Promise.resolve("lost"),
   *   extend: () => Promise.resolve("lost"),
   * };
   * const store = new FailoverStore({ primary: new MemoryStore(), fallback: missingTable });
   * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };
   * await assert.rejects(store.claim("slot-1", options), StoreError); // a 503, not a silent success
   * ```
   */
  async migrate(): Promise<void> {
    await migrateStore(this.#fallback);
    this.#fallbackAnswered = true;
    await migrateStore(this.#primary);
  }

  /**
   * Claims `slot` on the primary and, on a primary miss, on the fallback
   * (see the class documentation for every path).
   *
   * @param slot The slot, at most 256 bytes.
   * @param options The fingerprint, lease and TTL of the claim.
   * @returns What the claim found; an `acquired` token names the stores that
   * issued it.
   * @throws {TypeError} When `slot` is not a valid slot or the fingerprint is
   * not a string.
   * @throws {RangeError} When `leaseMs` or `ttlMs` is not a positive number.
   * @throws {StoreError} When neither store can be reached, or, with
   * `strict`, when the primary misses and the fallback cannot be reached.
   */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    options = claimOptions(options);
    let first: ClaimResult;
    try {
      first = await this.#primary.claim(slot, options);
    } catch (primaryError) {
      return await this.#claimFallback(slot, options, primaryError);
    }
    if (first.state === "in_flight") {
      return await this.#checkInFlight(slot, options, first);
    }
    if (first.state !== "acquired") return first;

    let second: ClaimResult;
    try {
      second = await this.#fallback.claim(slot, options);
      this.#fallbackAnswered = true;
    } catch (error) {
      if (!this.#fallbackAnswered) {
        await this.#releaseQuietly("primary", slot, first.token);
        this.#emit({
          type: "fallback_unavailable",
          operation: "claim",
          slot,
          error,
        });
        throw new StoreError(
          `The fallback store has not answered once since this FailoverStore was made, so it is not trusted to be working (run 'await store.migrate()' at boot to create its table): ${
            messageOf(error)
          }`,
          { operation: "claim", cause: error },
        );
      }
      if (this.#strict) {
        await this.#releaseQuietly("primary", slot, first.token);
        throw new StoreError(
          `The fallback store is unreachable, and 'strict' refuses a claim on the primary alone: ${
            messageOf(error)
          }`,
          { operation: "claim", cause: error },
        );
      }
      this.#emit({
        type: "fallback_unavailable",
        operation: "claim",
        slot,
        error,
      });
      return {
        state: "acquired",
        token: `p:${first.token}`,
        recovered: first.recovered,
      };
    }

    switch (second.state) {
      case "acquired":
        return {
          state: "acquired",
          token: both(first.token, second.token),
          recovered: first.recovered || second.recovered,
        };
      case "completed": {
        // Copy only a record of this very request: the primary keeps the
        // fingerprint of the claim just made, so a copy under another
        // request's fingerprint would turn the original's retries into 422s.
        let copied = false;
        if (second.fingerprint === options.fingerprint) {
          copied = await this.#bestEffort(
            "complete",
            "primary",
            slot,
            () => this.#primary.complete(slot, first.token, second.response),
          );
        } else {
          await this.#releaseQuietly("primary", slot, first.token);
        }
        this.#emit({ type: "recovered", slot, copied });
        return second;
      }
      case "in_flight":
        await this.#releaseQuietly("primary", slot, first.token);
        return second;
    }
  }

  /**
   * Records `response` in the stores that issued `token`: the primary, the
   * fallback, or both in parallel.
   *
   * For a slot owned in both stores, the fallback's answer is the answer:
   * it is the store every new owner must get past, and the one that survives
   * a primary restart. A primary `lost` beside a fallback `applied` (the
   * primary lost the record) is `applied`, with a `diverged` event; when one
   * store throws, the other's answer stands (event `write_failed`).
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param response The response to replay.
   * @returns `applied`, or `lost` when the token no longer owns the slot (or
   * is not a token of this store).
   * @throws {TypeError} When `slot` is not a valid slot.
   * @throws {StoreError} When the outcome is unknown: the store that issued
   * the token threw, or both did.
   */
  complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    return this.#write(
      "complete",
      slot,
      token,
      (store, t) => store.complete(slot, t, response),
    );
  }

  /**
   * Frees the slot in the stores that issued `token` (both in parallel for a
   * slot owned in both; the outcome as for
   * {@linkcode FailoverStore.complete}).
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is not a valid slot.
   * @throws {StoreError} When the outcome is unknown.
   */
  release(slot: string, token: string): Promise<WriteOutcome> {
    return this.#write(
      "release",
      slot,
      token,
      (store, t) => store.release(slot, t),
    );
  }

  /**
   * Renews the lease in the stores that issued `token` (both in parallel for
   * a slot owned in both; the outcome as for
   * {@linkcode FailoverStore.complete}, so a primary that restarted empty
   * does not stop the renewals that keep the fallback's lease alive).
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param leaseMs The new lease, from now.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is not a valid slot.
   * @throws {StoreError} When the outcome is unknown.
   */
  extend(slot: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    try {
      leaseMs = durationMs("leaseMs", leaseMs);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#write(
      "extend",
      slot,
      token,
      (store, t) => store.extend(slot, t, leaseMs),
    );
  }

  /**
   * A primary `in_flight` is not final: it may be an orphan (a claim that
   * timed out and landed when the primary came back) while the fallback
   * holds the completed record of the run that went through it. The
   * fallback decides: `completed` is the answer; otherwise the primary's
   * answer stands, and a fallback claim this made is released.
   */
  async #checkInFlight(
    slot: string,
    options: ClaimOptions,
    first: ClaimResult,
  ): Promise<ClaimResult> {
    let second: ClaimResult;
    try {
      second = await this.#fallback.claim(slot, options);
    } catch {
      return first;
    }
    if (second.state === "completed") {
      this.#emit({ type: "recovered", slot, copied: false });
      return second;
    }
    if (second.state === "acquired") {
      await this.#releaseQuietly("fallback", slot, second.token);
    }
    return first;
  }

  async #claimFallback(
    slot: string,
    options: ClaimOptions,
    primaryError: unknown,
  ): Promise<ClaimResult> {
    let result: ClaimResult;
    try {
      result = await this.#fallback.claim(slot, options);
      this.#fallbackAnswered = true;
    } catch (fallbackError) {
      throw new StoreError(
        `Both stores failed to claim: primary: ${
          messageOf(primaryError)
        }; fallback: ${messageOf(fallbackError)}`,
        {
          operation: "claim",
          cause: new AggregateError(
            [primaryError, fallbackError],
            "The primary and the fallback store both failed",
          ),
        },
      );
    }
    this.#emit({
      type: "fallback",
      operation: "claim",
      slot,
      error: primaryError,
    });
    if (result.state !== "acquired") return result;
    return {
      state: "acquired",
      token: `f:${result.token}`,
      recovered: result.recovered,
    };
  }

  async #write(
    operation: Exclude<StoreOperation, "claim">,
    slot: string,
    token: string,
    write: (store: IdempotencyStore, token: string) => Promise<WriteOutcome>,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    const r = route(token);
    if (r === null) return "lost";
    if (r.kind === "p") return await write(this.#primary, r.primary);
    if (r.kind === "f") return await write(this.#fallback, r.fallback);
    const [p, f] = await Promise.all([
      settle(() => write(this.#primary, r.primary)),
      settle(() => write(this.#fallback, r.fallback)),
    ]);
    if (!p.ok && !f.ok) {
      throw new StoreError(
        `Both stores failed to ${operation} (outcome unknown): primary: ${
          messageOf(p.error)
        }; fallback: ${messageOf(f.error)}`,
        {
          operation,
          cause: new AggregateError(
            [p.error, f.error],
            "The primary and the fallback store both failed",
          ),
        },
      );
    }
    if (!p.ok) {
      this.#emit({
        type: "write_failed",
        operation,
        store: "primary",
        slot,
        error: p.error,
      });
      return (f as { value: WriteOutcome }).value;
    }
    if (!f.ok) {
      this.#emit({
        type: "write_failed",
        operation,
        store: "fallback",
        slot,
        error: f.error,
      });
      return p.value;
    }
    if (p.value !== f.value) {
      this.#emit({
        type: "diverged",
        operation,
        slot,
        primary: p.value,
        fallback: f.value,
      });
    }
    return f.value;
  }

  /** Releases a claim that no answer depends on; reports a throw. */
  #releaseQuietly(
    role: FailoverRole,
    slot: string,
    token: string,
  ): Promise<boolean> {
    const store = role === "primary" ? this.#primary : this.#fallback;
    return this.#bestEffort(
      "release",
      role,
      slot,
      () => store.release(slot, token),
    );
  }

  /** Runs a write whose failure changes no answer; reports a throw. */
  async #bestEffort(
    operation: StoreOperation,
    store: FailoverRole,
    slot: string,
    write: () => Promise<WriteOutcome>,
  ): Promise<boolean> {
    const result = await settle(write);
    if (!result.ok) {
      this.#emit({
        type: "write_failed",
        operation,
        store,
        slot,
        error: result.error,
      });
      return false;
    }
    return result.value === "applied";
  }

  #emit(event: FailoverEvent): void {
    const listener = this.#onEvent;
    if (listener === undefined) return;
    try {
      listener(event);
    } catch {
      // A listener's failure must not change what the store answers.
    }
  }
}

/** Runs a store's `migrate()` when it has one. */
async function migrateStore(store: IdempotencyStore): Promise<void> {
  const migrate = (store as { migrate?: unknown }).migrate;
  if (typeof migrate === "function") await migrate.call(store);
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : String(error);
}
