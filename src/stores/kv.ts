// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode KvStore}: idempotency records in Deno KV, in a local file or on
 * Deno Deploy. Needs `--unstable-kv` at run time.
 *
 * @module
 */

import { assertSlot, StoreError } from "../store.ts";
import { claimOptions, durationMs } from "./_shared.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  IdempotencyStore,
  PeekOptions,
  PeekResult,
  StoredResponse,
  StoreEvent,
  StoreStats,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import {
  knownOptions,
  optionalFunction,
  positiveInteger,
} from "../_validate.ts";
import type { Orphans } from "./_orphans.ts";
import { KvEngine } from "./_kv_engine.ts";
import { applyMutations, KvMutations, KvUnit } from "./_kv_unit.ts";
import { unlocked } from "./_kv_bodies.ts";
import { isClaimed } from "../_claimed.ts";
import { serviceCalls, type StoreCalls, timeoutOption } from "./_store_call.ts";

export { KvMutations } from "./_kv_unit.ts";

/** Options of the {@linkcode KvStore} constructor. */
export interface KvStoreOptions {
  /** The database, opened and closed by the caller (the store never closes it). */
  kv: Deno.Kv;
  /**
   * The prefix of every key of the store: a slot's record at
   * `[...prefix, "rec", slot]`, a large body's chunks at
   * `[...prefix, "chunk", slot, token, set, i]`.
   *
   * @default {["idempotency"]}
   */
  prefix?: Deno.KvKey;
  /**
   * The clock of leases and deadlines, in milliseconds since the epoch: inject
   * one to test expiry. On Deno Deploy each region reads its own, assumed in
   * sync (a skew shortens or lengthens leases and TTLs by as much).
   *
   * @default {Date.now}
   */
  clock?: () => number;
  /**
   * How long one operation may take, a positive integer of milliseconds
   * (docs/architecture.md, "Store calls and deadlines"): Deno KV cannot cancel
   * a call, so a write may still apply after the error. `Infinity` waits as
   * long as Deno KV does.
   *
   * @default {10_000}
   */
  timeoutMs?: number;
  /**
   * Receives each {@linkcode StoreEvent}: the end of each undo of a claim
   * that failed but may have landed; a throw is ignored.
   * @default {undefined}
   */
  onEvent?: (event: StoreEvent) => void;
}

/** A handler given its request's KvMutations: {@linkcode KvStore.transactional}. */
export type AtomicHandler<A extends unknown[]> = (
  request: Request,
  atomic: KvMutations,
  ...args: A
) => Response | Promise<Response>;

/**
 * An {@linkcode IdempotencyStore} on Deno KV: a local file
 * (`Deno.openKv("./idempotency.db")`) keeps one process's records across
 * restarts, and the same code runs distributed on Deno Deploy
 * (`Deno.openKv()`). Every record carries its deadline (Deno KV deletes
 * expired keys late) and is written with `expireIn` up to it. A body over
 * about 60 KiB goes first in 64 KiB chunks under the claim's token, then one
 * fenced commit completes the record: a reader never sees a torn body
 * (missing chunks read as in flight, `fingerprint: null`), and chunks a
 * failure leaves expire a minute after their record. An unreadable value
 * stays in flight until it is deleted or Deno KV expires it. A local file
 * locked by another handle is waited for briefly, so processes may share
 * one. The handler's own writes can commit with the record:
 * {@linkcode KvStore.atomic}.
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
 *     await store.complete("slot-1", claim.token, { status: 201, headers: [], body: new Uint8Array([1]) });
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
  #engine: KvEngine;
  #orphans: Orphans;
  #calls: StoreCalls;
  #units = new WeakMap<Request, KvUnit>();
  #kv: Deno.Kv;

  /**
   * Makes a store on a database the caller opened.
   *
   * @throws {TypeError} When `kv`, `prefix`, `clock` or `onEvent` is not what
   * it should be, or an option is unknown.
   * @throws {RangeError} When `timeoutMs` is not a positive integer or `Infinity`.
   */
  constructor(options: KvStoreOptions) {
    const { kv, prefix, clock, timeoutMs, onEvent } = kvSettings(options);
    this.#engine = new KvEngine(kv, prefix, clock);
    this.#kv = kv;
    ({ calls: this.#calls, orphans: this.#orphans } = serviceCalls({
      service: "Deno KV",
      timeoutMs,
      onEvent,
      release: (slot, token) => this.release(slot, token),
      failed: (operation, error) =>
        error instanceof StoreError ? error : new StoreError(
          `Deno KV failed to ${operation}: ${error}${
            (error as { name?: unknown } | null)?.name === "BadResource"
              ? CLOSED
              : ""
          }`,
          { operation, cause: error },
        ),
    }));
  }

  /** {@linkcode IdempotencyStore.claim}, checked against the versionstamp read. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const checked = claimOptions(options);
    const claim = () => this.#engine.claim(slot, checked);
    return await this.#calls.run("claim", claim, {
      slot,
      leaseMs: checked.leaseMs,
      acquired: (found) => found.state === "acquired" ? found.token : undefined,
    });
  }

  /** {@linkcode IdempotencyStore.complete}; a large body's chunks go first. */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    const call = () => this.#engine.complete(slot, token, response);
    return await this.#calls.run("complete", call);
  }

  /** {@linkcode IdempotencyStore.release}, with the chunks written under the token. */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    const call = () => this.#engine.release(slot, token);
    return await this.#calls.run("release", call);
  }

  /** {@linkcode IdempotencyStore.extend}; the record's deadline stays. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    leaseMs = durationMs("leaseMs", leaseMs);
    const call = () => this.#engine.extend(slot, token, leaseMs);
    return await this.#calls.run("extend", call);
  }

  /**
   * {@linkcode IdempotencyStore.peek}: one read of the record (a chunked
   * body's header chunks too), on the store's clock; Deno KV keeps no claim
   * time (`claimedAt: null`) nor an unreadable value's expiry (`null`).
   */
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    const response = options?.response === true;
    return await this.#calls.run(
      "peek",
      () => this.#engine.peek(slot, response),
    );
  }

  /** {@linkcode IdempotencyStore.forget}: the record and its body chunks, in one commit when they fit. */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    return await this.#calls.run("forget", () => this.#engine.forget(slot));
  }

  /**
   * {@linkcode IdempotencyStore.stats}: lists the records, at most `limit`
   * (10,000 by default; `exact: false` when there were more).
   */
  async stats(options?: { limit?: number }): Promise<StoreStats> {
    const limit = positiveInteger("limit", options?.limit ?? 10_000);
    return await this.#calls.run("stats", () => this.#engine.stats(limit));
  }

  /** {@linkcode IdempotencyStore.subscribe}: the end of each undo ({@linkcode StoreEvent}). */
  subscribe(listener: (event: StoreEvent) => void): void {
    this.#orphans.subscribe(listener);
  }

  /**
   * {@linkcode IdempotencyStore.waitForChange} through `Deno.Kv.watch()`. On
   * Deno Deploy a watch sees every instance's writes; on a local file, only
   * those of this process's handles (another process's waiter polls).
   */
  async waitForChange(slot: string, signal: AbortSignal): Promise<void> {
    assertSlot(slot);
    await this.#engine.watch(slot, signal);
  }

  /**
   * The request's own checks and mutations, committed in the commit that
   * completes its record, or never (a throw, an uncacheable response, a lost
   * claim). Pass the request the guarded handler received (`c.req.raw`).
   *
   * @throws {TypeError} When the request is not one this store's middleware claimed.
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
   * Wraps a handler so that it receives the request's
   * {@linkcode KvStore.atomic} as its second argument. A request no store
   * claimed (without a key, of a method not guarded, run by `failOpen`) gets
   * mutations of its own, the same `KvMutations`: committed in one
   * `kv.atomic()` when the handler returns, whatever its status, dropped
   * when it throws; a check that fails there throws (nothing committed). So
   * the same handler serves keyed and keyless requests.
   *
   * @throws {TypeError} When `handler` is not a function; on a request
   * another store's middleware claimed, as {@linkcode KvStore.atomic}.
   *
   * @example The same handler, with a key and without
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import { KvStore } from "@idempotent/http/kv";
   * import assert from "node:assert/strict";
   *
   * using kv = await Deno.openKv(":memory:");
   * const store = new KvStore({ kv });
   * const handler = idempotency(store.transactional((req, atomic) => {
   *   const id = req.headers.get("x-order")!;
   *   atomic.set(["orders", id], "book");
   *   return new Response("ordered", { status: 201 });
   * }), { store, scope: "global" }); // one caller in this example
   * const order = (id: string, key?: string) =>
   *   new Request("http://localhost/orders", {
   *     method: "POST",
   *     headers: { "x-order": id, ...(key ? { "idempotency-key": key } : {}) },
   *   });
   * assert.equal((await handler(order("1", "k-1"))).status, 201);
   * assert.equal((await handler(order("2"))).status, 201); // no key
   * assert.equal((await kv.get(["orders", "2"])).value, "book");
   * ```
   */
  transactional<A extends unknown[]>(
    handler: AtomicHandler<A>,
  ): (request: Request, ...args: A) => Promise<Response> {
    if (typeof handler !== "function") {
      throw new TypeError(
        `'handler' must be a function: current value is ${handler}`,
      );
    }
    return async (request, ...args) => {
      if (this.#units.has(request) || isClaimed(request)) {
        return await handler(request, this.atomic(request), ...args);
      }
      // No key, a method not guarded, failOpen: a commit of its own.
      const mutations = new KvMutations();
      const response = await handler(request, mutations, ...args);
      const op = applyMutations(mutations, this.#kv.atomic());
      const { ok } = await unlocked(() => op.commit());
      if (!ok) {
        await response.body?.cancel();
        throw new Error(
          "KvStore.transactional(): a check of the handler's failed, so nothing was committed (a request no store claimed)",
        );
      }
      return response;
    };
  }

  /**
   * {@linkcode IdempotencyStore.unitOfWork}: remembers the claimed request
   * for {@linkcode KvStore.atomic}.
   */
  unitOfWork(request: Request, slot: string, token: string): UnitOfWork {
    const unit = new KvUnit((record, mutations) => {
      assertStoredResponse(record);
      const call = () => this.#engine.complete(slot, token, record, mutations);
      return this.#calls.run("complete", call);
    });
    this.#units.set(request, unit);
    return unit;
  }
}

/** What a `BadResource` from Deno KV means here, and what to do. */
const CLOSED =
  ": the Deno.Kv is closed: keep it open while the store is in use (close it only after the server stops)";

const KV_OPTIONS = ["kv", "prefix", "clock", "timeoutMs", "onEvent"];

type KvSettings = Required<Omit<KvStoreOptions, "onEvent">> & {
  onEvent: KvStoreOptions["onEvent"];
};

function kvSettings(options: KvStoreOptions): KvSettings {
  const { kv, prefix = ["idempotency"] } = options ?? {};
  knownOptions("KvStore", options ?? {}, KV_OPTIONS);
  const timeoutMs = timeoutOption(options?.timeoutMs, 10_000);
  if (
    kv === null || typeof kv !== "object" || typeof kv.atomic !== "function"
  ) {
    throw new TypeError("'kv' must be a Deno.Kv: current value is " + kv);
  }
  if (!Array.isArray(prefix)) {
    throw new TypeError(
      `'prefix' must be an array of key parts: current value is ${prefix}`,
    );
  }
  const clock = optionalFunction("clock", options?.clock) ?? Date.now;
  const onEvent = optionalFunction("onEvent", options?.onEvent);
  return { kv, prefix: [...prefix], clock, timeoutMs, onEvent };
}
