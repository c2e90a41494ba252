// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode KvStore}: idempotency records in Deno KV, in a local file or on
 * Deno Deploy. Needs `--unstable-kv` at run time.
 *
 * @module
 */

import { StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
import { assertSlot, claimOptions, durationMs } from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { Orphans } from "./_orphans.ts";
import { KvSlots } from "./_kv_slots.ts";
import { kvSettings, type KvStoreOptions } from "./_kv_options.ts";
import { type KvMutations, KvUnit } from "./_kv_unit.ts";
import { StoreCalls } from "./_store_call.ts";

export * from "./_contract.ts";
export { KvMutations } from "./_kv_unit.ts";
export type { KvStoreOptions } from "./_kv_options.ts";

/**
 * An {@linkcode IdempotencyStore} on Deno KV: one process keeps its records
 * across restarts in a local file (`Deno.openKv("./idempotency.db")`), and
 * the same code runs distributed on Deno Deploy (`Deno.openKv()`).
 *
 * - **Claims** read the slot's record and commit the decision with
 *   `atomic().check()` on the versionstamp read: of concurrent claims exactly
 *   one commits, the others read again and report what won. `complete`,
 *   `release` and `extend` are fenced the same way, after checking that the
 *   token owns the slot.
 * - **TTL.** Every record carries its deadline and is written with
 *   `expireIn` up to it. Deno KV deletes expired keys late, so the store
 *   checks the deadline itself: an expired record never blocks. `complete`
 *   and `extend` recompute `expireIn` from the stored deadline (KV has no
 *   `KEEPTTL`).
 * - **Bodies.** A small record (up to about 60 KiB) is one value. A larger
 *   one is split into 64 KiB chunks written first, in as many commits as
 *   Deno KV's 800 KB per commit needs, under keys tied to the claim's token;
 *   one fenced commit then flips the record to completed. A reader never
 *   sees a torn body: a completed record whose chunks are missing or damaged
 *   reads as in flight with `fingerprint: null` until its deadline. Chunks of
 *   a lost completion, a release or a taken-over claim are deleted; chunks
 *   that a failure leaves behind expire a minute after their record.
 * - **Unreadable values** (not written by this store, or by a later version
 *   of it) read as in flight with `fingerprint: null` and are never taken
 *   over: such a value has no deadline the store trusts, so it stays until
 *   it is deleted or expires by Deno KV's own expiry, if one was set on it.
 * - **Failures** of Deno KV (a closed database, a network error on Deploy,
 *   too much contention, no answer within `timeoutMs`) throw
 *   {@linkcode StoreError} with the cause. A local file that another handle
 *   holds locked ("database is locked") is waited for briefly first, so
 *   several processes may share one file.
 *
 * **The handler's own writes, exactly once (opt-in).** A guarded handler
 * may collect Deno KV checks and mutations with
 * {@linkcode KvStore.atomic}; they are committed in the atomic commit that
 * completes the record (fenced by the claim's versionstamp), so both land
 * or neither does: a throw, a response that is not cacheable or a claim
 * lost to a takeover (409) commits none of them, a failed check of the
 * handler's commits nothing (503, the retry runs).
 *
 * @example Claim, complete and replay on an in-memory database
 * ```ts
 * import { KvStore } from "@idempotent/http/kv";
 * import assert from "node:assert/strict";
 *
 * using kv = await Deno.openKv(":memory:");
 * const store = new KvStore({ kv });
 * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 86_400_000 };
 * const claim = await store.claim("slot-1", options);
 * assert.equal(claim.state, "acquired");
 * if (claim.state === "acquired") {
 *   const body = new TextEncoder().encode("created");
 *   assert.equal(await store.complete("slot-1", claim.token, { status: 201, headers: [], body }), "applied");
 * }
 * const replay = await store.claim("slot-1", options);
 * assert.equal(replay.state, "completed");
 * ```
 *
 * @example Persist records in a local file
 * ```ts
 * import { KvStore } from "@idempotent/http/kv";
 * import assert from "node:assert/strict";
 *
 * const path = await Deno.makeTempFile();
 * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 86_400_000 };
 * {
 *   using kv = await Deno.openKv(path);
 *   const store = new KvStore({ kv, prefix: ["my-app", "idempotency"] });
 *   const claim = await store.claim("slot-1", options);
 *   if (claim.state === "acquired") {
 *     await store.complete("slot-1", claim.token, { status: 200, headers: [], body: null, omitted: "too_large" });
 *   }
 * }
 * {
 *   using kv = await Deno.openKv(path); // as after a restart
 *   const store = new KvStore({ kv, prefix: ["my-app", "idempotency"] });
 *   assert.equal((await store.claim("slot-1", options)).state, "completed");
 * }
 * await Deno.remove(path);
 * ```
 */
export class KvStore implements IdempotencyStore {
  #slots: KvSlots;
  #orphans = new Orphans((slot, token) => this.release(slot, token));
  #calls: StoreCalls;
  #units = new WeakMap<Request, KvUnit>();

  /**
   * Makes a store on a database the caller opened.
   *
   * @param options The database, the key prefix and the clock.
   * @throws {TypeError} When `kv`, `prefix` or `clock` is not what it should be.
   */
  constructor(options: KvStoreOptions) {
    const { kv, prefix, clock, timeoutMs } = kvSettings(options);
    this.#slots = new KvSlots(kv, prefix, clock);
    this.#calls = new StoreCalls(timeoutMs, this.#orphans, {
      failed: (operation, error) =>
        error instanceof StoreError ? error : new StoreError(
          `Deno KV failed to ${operation}: ${error}`,
          { operation, cause: error },
        ),
      timedOut: (operation) =>
        new StoreError(
          `Deno KV ${operation} did not answer within ${timeoutMs} ms`,
          { operation, cause: new Error(`Timed out after ${timeoutMs} ms`) },
        ),
    });
  }

  /**
   * Reserves `slot` if it is free (absent, or past its deadline), takes it
   * over if its owner's lease ran out, or reports what holds it, in one
   * check-and-commit on the record's versionstamp.
   *
   * @param slot The slot, at most 256 bytes.
   * @param options The fingerprint, lease and TTL of the claim.
   * @returns What the claim found.
   * @throws {TypeError} When `slot` is not a slot.
   * @throws {RangeError} When `leaseMs` or `ttlMs` is not a positive number.
   * @throws {StoreError} When Deno KV fails, or stays contended.
   *
   * @example A second claim sees the first one in flight
   * ```ts
   * import { KvStore } from "@idempotent/http/kv";
   * import assert from "node:assert/strict";
   *
   * using kv = await Deno.openKv(":memory:");
   * const store = new KvStore({ kv });
   * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };
   * assert.equal((await store.claim("slot-1", options)).state, "acquired");
   * const second = await store.claim("slot-1", options);
   * assert.equal(second.state, "in_flight");
   * ```
   */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const checked = claimOptions(options);
    // A claim that acquires the slot after its caller got an error is
    // undone, fenced by the token it acquired under.
    const claim = () => this.#slots.claim(slot, checked);
    return await this.#calls.run("claim", claim, {
      slot,
      leaseMs: checked.leaseMs,
      acquired: (found) => found.state === "acquired" ? found.token : undefined,
    });
  }

  /**
   * Records `response` as the slot's answer if `token` still owns the slot,
   * keeping the first claim's deadline. A large record's chunks are written
   * first; one fenced commit then flips the record to completed.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param response The response to replay.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` or `response` is malformed.
   * @throws {StoreError} When Deno KV fails: the outcome is unknown.
   *
   * @example Complete a claim with a 1 MiB body
   * ```ts
   * import { KvStore } from "@idempotent/http/kv";
   * import assert from "node:assert/strict";
   *
   * using kv = await Deno.openKv(":memory:");
   * const store = new KvStore({ kv });
   * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };
   * const claim = await store.claim("slot-1", options);
   * assert.equal(claim.state, "acquired");
   * if (claim.state === "acquired") {
   *   const body = new Uint8Array(1_048_576).fill(7);
   *   assert.equal(await store.complete("slot-1", claim.token, { status: 200, headers: [], body }), "applied");
   *   assert.equal(await store.complete("slot-1", claim.token, { status: 200, headers: [], body }), "lost");
   * }
   * const replay = await store.claim("slot-1", options);
   * assert.equal(replay.state === "completed" && replay.response.body?.byteLength, 1_048_576);
   * ```
   */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    return await this.#calls.run(
      "complete",
      () => this.#slots.complete(slot, token, response),
    );
  }

  /**
   * Frees the slot if `token` still owns it, and deletes the chunks written
   * under the token.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is not a slot.
   * @throws {StoreError} When Deno KV fails: the outcome is unknown.
   *
   * @example Release a claim so that the next request runs
   * ```ts
   * import { KvStore } from "@idempotent/http/kv";
   * import assert from "node:assert/strict";
   *
   * using kv = await Deno.openKv(":memory:");
   * const store = new KvStore({ kv });
   * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };
   * const claim = await store.claim("slot-1", options);
   * if (claim.state === "acquired") {
   *   assert.equal(await store.release("slot-1", claim.token), "applied");
   * }
   * assert.equal((await store.claim("slot-1", options)).state, "acquired");
   * ```
   */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    return await this.#calls.run(
      "release",
      () => this.#slots.release(slot, token),
    );
  }

  /**
   * Renews the lease to `leaseMs` from now if `token` still owns the slot,
   * keeping the record's deadline.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param leaseMs The new lease, from now.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is not a slot.
   * @throws {RangeError} When `leaseMs` is not a positive number.
   * @throws {StoreError} When Deno KV fails: the outcome is unknown.
   *
   * @example Extend a lease while the handler runs
   * ```ts
   * import { KvStore } from "@idempotent/http/kv";
   * import assert from "node:assert/strict";
   *
   * using kv = await Deno.openKv(":memory:");
   * const store = new KvStore({ kv });
   * const claim = await store.claim("slot-1", { fingerprint: "f", leaseMs: 1_000, ttlMs: 60_000 });
   * if (claim.state === "acquired") {
   *   assert.equal(await store.extend("slot-1", claim.token, 30_000), "applied");
   * }
   * ```
   */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    leaseMs = durationMs("leaseMs", leaseMs);
    return await this.#calls.run(
      "extend",
      () => this.#slots.extend(slot, token, leaseMs),
    );
  }

  /**
   * Resolves when the slot may have changed since a claim found it in
   * flight (see {@linkcode IdempotencyStore.waitForChange}): at once when its
   * record is absent, completed or past its lease, else (in flight, or
   * unreadable) at the record's next write, seen through `Deno.Kv.watch()`,
   * which pushes changes without any cost to the writers. On Deno Deploy a watch sees
   * every instance's writes; a local database file sees the writes made
   * through any handle of this process only, so a waiter in another
   * process falls back on the middleware's safety net (a claim at least once
   * a second).
   *
   * @param slot The slot.
   * @param signal Ends the watch: the promise then resolves.
   * @returns When the slot may have changed, or the signal aborted.
   *
   * @example Wake on a completion
   * ```ts
   * import { KvStore } from "@idempotent/http/kv";
   * import assert from "node:assert/strict";
   *
   * using kv = await Deno.openKv(":memory:");
   * const store = new KvStore({ kv });
   * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };
   * const claim = await store.claim("slot-1", options);
   * assert.equal(claim.state, "acquired");
   * const changed = store.waitForChange("slot-1", new AbortController().signal);
   * if (claim.state === "acquired") {
   *   await store.complete("slot-1", claim.token, { status: 201, headers: [], body: null, omitted: "too_large" });
   * }
   * await changed;
   * assert.equal((await store.claim("slot-1", options)).state, "completed");
   * ```
   */
  async waitForChange(slot: string, signal: AbortSignal): Promise<void> {
    assertSlot(slot);
    await this.#slots.watch(slot, signal);
  }

  /**
   * The request's own checks and mutations, committed in the one atomic
   * commit that completes its record, or never (a throw, a response that is
   * not cacheable, a claim lost to a takeover). Call it from a handler
   * guarded by `idempotency(handler, { store, scope })` with this store,
   * passing the request the handler received (in Hono, `c.req.raw`).
   *
   * @param request The request the guarded handler received.
   * @returns The request's mutations (the same on every call).
   * @throws {TypeError} When the request is not one this store's middleware
   * claimed.
   *
   * @example An order and its record in one commit
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import { KvStore } from "@idempotent/http/kv";
   * import assert from "node:assert/strict";
   *
   * using kv = await Deno.openKv(":memory:");
   * const store = new KvStore({ kv });
   * const handler = idempotency((req) => {
   *   store.atomic(req).set(["orders", req.headers.get("idempotency-key")!], "book");
   *   return new Response("ordered", { status: 201 });
   * }, { store, scope: "global" }); // one caller in this example
   * const post = () => new Request("http://localhost/orders", { method: "POST", headers: { "idempotency-key": "o-1" } });
   * assert.equal((await handler(post())).status, 201);
   * assert.equal((await handler(post())).headers.get("idempotent-replayed"), "true");
   * assert.equal((await kv.get(["orders", "o-1"])).value, "book");
   * ```
   */
  atomic(request: Request): KvMutations {
    const unit = this.#units.get(request);
    if (unit === undefined) {
      throw new TypeError(
        "No unit of work for this request: only a request this KvStore's middleware claimed has one (pass the request the handler received)",
      );
    }
    return unit.mutations();
  }

  /**
   * The capability the middleware uses (see
   * {@linkcode IdempotencyStore.unitOfWork}): remembers the claimed request,
   * so that its handler can collect mutations with
   * {@linkcode KvStore.atomic}.
   *
   * @param request The request the handler receives.
   * @param slot The claimed slot.
   * @param token The claim's token.
   * @returns The request's unit of work.
   */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new KvUnit((record, mutations) => {
      assertStoredResponse(record);
      return this.#calls.run(
        "complete",
        () => this.#slots.complete(slot, token, record, mutations),
      );
    });
    this.#units.set(request, unit);
    return unit;
  }
}
