// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode KvStore}: idempotency records in Deno KV. The persistent
 * embedded default: one process keeps its records across restarts in a
 * local file (`Deno.openKv("./idempotency.db")`), and the same code runs
 * distributed on Deno Deploy (`Deno.openKv()`).
 *
 * Needs `--unstable-kv` at run time.
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
 * @module
 */

import { StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  StoreOperation,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
import { assertSlot, claimOptions, durationMs } from "../store.ts";
import {
  assertStoredResponse,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";
import { Orphans } from "./_orphans.ts";
import {
  assemble,
  CHUNK_SLACK_MS,
  type ChunkedRecord,
  commitGroups,
  completion,
  GET_MANY,
  type InFlightRecord,
  type InlineRecord,
  type KvRecord,
  parseRecord,
  READ_WINDOW,
} from "./_kv_chunks.ts";
import { StoreCalls } from "./_store_call.ts";

import {
  applyMutations,
  hasChecks,
  type KvMutations,
  KvUnit,
} from "./_kv_unit.ts";

export * from "./_contract.ts";
export { KvMutations } from "./_kv_unit.ts";

/** Options of the {@linkcode KvStore} constructor. */
export interface KvStoreOptions {
  /**
   * The database, opened by the caller (`Deno.openKv(path)` locally,
   * `Deno.openKv()` on Deno Deploy). The caller closes it: the store never
   * does.
   */
  kv: Deno.Kv;
  /**
   * The key prefix under which every key of the store lives: the record of a
   * slot at `[...prefix, "rec", slot]`, the chunks of a large body at
   * `[...prefix, "chunk", slot, token, set, i]`.
   *
   * @default {["idempotency"]}
   */
  prefix?: Deno.KvKey;
  /**
   * The clock, in milliseconds since the epoch, that leases and deadlines are
   * measured with. Real deployments keep the system clock; tests inject a
   * fake one to let time pass without sleeping. On Deno Deploy every region
   * reads its own system clock, which the store assumes to be synchronized
   * (a skew shortens or lengthens leases and TTLs by as much).
   *
   * @default {Date.now}
   */
  clock?: () => number;
  /**
   * How long one operation may take, in milliseconds, before it throws a
   * {@linkcode StoreError} (for a write, the outcome is unknown). The
   * deadline only stops the waiting: Deno KV has no way to cancel a call,
   * so the operation goes on, and a write may still apply. A claim that
   * acquires the slot after its caller got the error is released again
   * (retried with a backoff, for at most one lease), so it never holds the
   * key. `Infinity` waits for as long as Deno KV takes.
   *
   * @default {10_000}
   */
  timeoutMs?: number;
}

/** Deletes per cleanup commit (Deno KV's limit is 1000 mutations). */
const DELETE_BATCH = 500;
/** Read-decide-commit attempts before a contended operation gives up. */
const MAX_ATTEMPTS = 16;

/** What a read of a slot found. */
type Found =
  | { kind: "absent" }
  | { kind: "unreadable" }
  | { kind: "record"; record: KvRecord };

/**
 * An {@linkcode IdempotencyStore} on Deno KV, for one process with a local
 * file or for many isolates on Deno Deploy.
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
 *   one (bodies up to `maxResponseBytes`, 1 MiB by default, and more) is
 *   split into 64 KiB chunks written first, in as many commits as Deno KV's
 *   800 KB per commit needs, under keys tied to the claim's token; one fenced
 *   commit then flips the record to completed. A reader never sees a torn
 *   body: a completed record whose chunks are missing or damaged reads as in
 *   flight with `fingerprint: null` until its deadline. Chunks of a lost
 *   completion, a release or a taken-over claim are deleted; chunks that a
 *   failure leaves behind expire a minute after their record.
 * - **Unreadable values** (not written by this store, or by a later version
 *   of it) read as in flight with `fingerprint: null` and are never taken
 *   over: such a value has no deadline the store trusts, so it stays until
 *   it is deleted or expires by Deno KV's own expiry, if one was set on it.
 * - **Failures** of Deno KV (a closed database, a network error on Deploy,
 *   too much contention, no answer within `timeoutMs`) throw
 *   {@linkcode StoreError} with the cause. The deadline stops the waiting,
 *   not the call (Deno KV cannot cancel one); a claim that lands after it is
 *   released again. A
 *   local file that another handle holds locked ("database is locked") is
 *   waited for briefly first, so several processes may share one file.
 * - **No timeout.** Deno KV offers no way to cancel an operation, so the
 *   store has no timeout of its own: a stalled database stalls the requests
 *   waiting on it, where `RedisStore` and `PostgresStore` throw after their
 *   `timeoutMs` (503 on a claim).
 *
 * **The handler's own writes, exactly once (opt-in).** A guarded handler
 * may collect Deno KV checks and mutations with
 * {@linkcode KvStore.atomic}; they are committed in the atomic commit that
 * completes the record (fenced by the claim's versionstamp), so both land
 * or neither does: a throw, a response that is not cacheable or a claim
 * lost to a takeover (409) commits none of them, a failed check of the
 * handler's commits nothing (503, the retry runs).
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
  #kv: Deno.Kv;
  #prefix: Deno.KvKey;
  #clock: () => number;
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
    const { kv, prefix = ["idempotency"], clock = Date.now } = options ?? {};
    const timeoutMs = options?.timeoutMs ?? 10_000;
    if (typeof timeoutMs !== "number" || !(timeoutMs > 0)) {
      throw new RangeError(
        `'timeoutMs' must be a positive number: current value is ${timeoutMs}`,
      );
    }
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
    if (typeof clock !== "function") {
      throw new TypeError(
        `'clock' must be a function: current value is ${clock}`,
      );
    }
    this.#kv = kv;
    this.#prefix = [...prefix];
    this.#clock = clock;
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
    return await this.#calls.run("claim", () => this.#claim(slot, checked), {
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
      () => this.#complete(slot, token, response),
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
      () => this.#release(slot, token),
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
      () => this.#extend(slot, token, leaseMs),
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
    if (signal.aborted) return;
    const reader = this.#kv.watch([this.#recordKey(slot)]).getReader();
    const stop = () => void reader.cancel().catch(() => {});
    signal.addEventListener("abort", stop, { once: true });
    try {
      const first = await reader.read();
      const entry = first.value?.[0];
      if (first.done || entry === undefined || entry.versionstamp === null) {
        return;
      }
      const record = parseRecord(entry.value);
      const now = this.#clock();
      // An unreadable value stays in flight until it changes.
      if (
        record !== null && (record.state !== "in_flight" ||
          now >= record.leaseUntil || now >= record.deadline)
      ) {
        return;
      }
      for (;;) {
        const next = await reader.read();
        if (next.done || next.value[0]?.versionstamp !== entry.versionstamp) {
          return;
        }
      }
    } finally {
      signal.removeEventListener("abort", stop);
      stop();
    }
  }

  /** Runs a write under the deadline. */
  /**
   * The request's own checks and mutations, committed in the one atomic
   * commit that completes its record, or never (a throw, a response that is
   * not cacheable, a claim lost to a takeover). Call it from a handler
   * guarded by `idempotency(handler, { store })` with this store, passing
   * the request the handler received (in Hono, `c.req.raw`).
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
   * }, { store });
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
        () => this.#complete(slot, token, record, mutations),
      );
    });
    this.#units.set(request, unit);
    return unit;
  }

  #recordKey(slot: string): Deno.KvKey {
    return [...this.#prefix, "rec", slot];
  }

  #tokenChunksPrefix(slot: string, token: string): Deno.KvKey {
    return [...this.#prefix, "chunk", slot, token];
  }

  #chunkKey(slot: string, token: string, set: string, i: number): Deno.KvKey {
    return [...this.#prefix, "chunk", slot, token, set, i];
  }

  async #read(slot: string): Promise<[Deno.KvEntryMaybe<unknown>, Found]> {
    const entry = await unlocked(() => this.#kv.get(this.#recordKey(slot)));
    if (entry.versionstamp === null) return [entry, { kind: "absent" }];
    const record = parseRecord(entry.value);
    return [
      entry,
      record === null ? { kind: "unreadable" } : { kind: "record", record },
    ];
  }

  async #claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    const key = this.#recordKey(slot);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [entry, found] = await this.#read(slot);
      const now = this.#clock();
      if (found.kind === "unreadable") {
        return unreadable(options.leaseMs);
      }
      let previous: KvRecord | null = null;
      let recovered = false;
      if (found.kind === "record") {
        const record = found.record;
        previous = record;
        if (now < record.deadline) {
          if (record.state === "completed") {
            const response = await this.#response(slot, record);
            if (response !== null) {
              return { state: "completed", fingerprint: record.fp, response };
            }
            // Chunks missing: torn, unless the record changed meanwhile.
            const again = await unlocked(() => this.#kv.get(key));
            if (again.versionstamp !== entry.versionstamp) continue;
            return unreadable(options.leaseMs);
          }
          if (now < record.leaseUntil) {
            return {
              state: "in_flight",
              fingerprint: record.fp,
              retryAfterMs: Math.max(
                1,
                Math.ceil(Math.min(record.leaseUntil, record.deadline) - now),
              ),
            };
          }
          recovered = true;
        }
      }
      const token = crypto.randomUUID();
      const fresh: InFlightRecord = {
        v: RECORD_VERSION,
        state: "in_flight",
        fp: options.fingerprint,
        token,
        leaseUntil: now + options.leaseMs,
        deadline: now + options.ttlMs,
      };
      const op = this.#kv.atomic()
        .check(entry)
        .set(key, fresh, { expireIn: expireIn(fresh.deadline, now) });
      const result = await unlocked(() => op.commit());
      if (!result.ok) continue;
      if (previous !== null) {
        await this.#dropTokenChunks(slot, previous);
      }
      return { state: "acquired", token, recovered };
    }
    throw contended("claim", slot);
  }

  async #complete(
    slot: string,
    token: string,
    response: StoredResponse,
    mutations?: KvMutations,
  ): Promise<WriteOutcome> {
    let [entry, found] = await this.#read(slot);
    let owned = owns(found, token, this.#clock());
    if (owned === null) return "lost";
    const { record: completed, parts } = completion(
      owned,
      response,
      () => crypto.randomUUID().slice(0, 8),
    );
    let written: Deno.KvKey[] = [];
    if ("set" in completed) {
      const set = completed.set;
      written = parts.map((_, i) => this.#chunkKey(slot, token, set, i));
      try {
        await this.#writeChunks(written, parts, owned.deadline);
      } catch (error) {
        await this.#deleteKeys(written);
        throw error;
      }
    }
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (await this.#replace(slot, entry, completed, undefined, mutations)) {
        return "applied";
      }
      const read = entry.versionstamp;
      [entry, found] = await this.#read(slot);
      if (
        mutations !== undefined && hasChecks(mutations) &&
        entry.versionstamp === read
      ) {
        // The record did not move: a check of the handler's failed.
        await this.#deleteKeys(written);
        throw new Error(
          "A check of the handler's mutations failed: nothing was committed",
        );
      }
      owned = owns(found, token, this.#clock());
      if (owned === null) {
        await this.#deleteKeys(written);
        return "lost";
      }
      // Still ours (a concurrent extend moved the versionstamp): keep its lease.
      completed.leaseUntil = owned.leaseUntil;
    }
    await this.#deleteKeys(written);
    throw contended("complete", slot);
  }

  async #release(slot: string, token: string): Promise<WriteOutcome> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [[entry, found], chunks] = await Promise.all([
        this.#read(slot),
        this.#listKeys(this.#tokenChunksPrefix(slot, token)),
      ]);
      if (owns(found, token, this.#clock()) === null) return "lost";
      // The token's chunks go in the same commit when they fit, after it if not.
      const inCommit = chunks.slice(0, DELETE_BATCH - 1);
      const op = this.#kv.atomic().check(entry).delete(this.#recordKey(slot));
      for (const key of inCommit) op.delete(key);
      const result = await unlocked(() => op.commit());
      if (!result.ok) continue;
      await this.#deleteKeys(chunks.slice(inCommit.length));
      return "applied";
    }
    throw contended("release", slot);
  }

  async #extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [entry, found] = await this.#read(slot);
      const now = this.#clock();
      const owned = owns(found, token, now);
      if (owned === null) return "lost";
      const renewed: InFlightRecord = { ...owned, leaseUntil: now + leaseMs };
      if (await this.#replace(slot, entry, renewed, now)) return "applied";
    }
    throw contended("extend", slot);
  }

  /**
   * Replaces the slot's record, if it is still the `entry` read, keeping the
   * record's deadline as its expiry. Returns whether it was replaced.
   */
  async #replace(
    slot: string,
    entry: Deno.KvEntryMaybe<unknown>,
    record: KvRecord,
    now: number = this.#clock(),
    mutations?: KvMutations,
  ): Promise<boolean> {
    const op = this.#kv.atomic()
      .check(entry)
      .set(this.#recordKey(slot), record, {
        expireIn: expireIn(record.deadline, now),
      });
    if (mutations !== undefined) applyMutations(mutations, op);
    return (await unlocked(() => op.commit())).ok;
  }

  /** Reads a completed record's response, or `null` when its chunks are torn. */
  async #response(
    slot: string,
    record: InlineRecord | ChunkedRecord,
  ): Promise<StoredResponse | null> {
    if (!("set" in record)) {
      return toStoredResponse(
        record.status,
        record.headers,
        record.body,
        record.omitted,
      );
    }
    // Chunks are read a window at a time and the read stops at the first
    // missing or surplus byte, so that what a reader allocates is bounded by
    // what is really stored, whatever counts a hostile value claims.
    const total = record.headersLength + (record.bodyLength ?? 0);
    const values: Uint8Array[] = [];
    let length = 0;
    for (let first = 0; first < record.chunks; first += READ_WINDOW) {
      const batches: Deno.KvKey[][] = [];
      const end = Math.min(record.chunks, first + READ_WINDOW);
      for (let i = first; i < end; i += GET_MANY) {
        batches.push(
          Array.from(
            { length: Math.min(GET_MANY, end - i) },
            (_, j) => this.#chunkKey(slot, record.token, record.set, i + j),
          ),
        );
      }
      const entries = (await Promise.all(
        batches.map((batch) => unlocked(() => this.#kv.getMany(batch))),
      )).flat();
      for (const entry of entries) {
        if (!(entry.value instanceof Uint8Array)) return null;
        length += entry.value.byteLength;
        if (length > total) return null;
        values.push(entry.value);
      }
    }
    return assemble(record, values, length);
  }

  /** Writes chunk values, as many per commit as fit, the commits concurrently. */
  async #writeChunks(
    keys: Deno.KvKey[],
    parts: Uint8Array[],
    deadline: number,
  ): Promise<void> {
    const options = {
      expireIn: expireIn(deadline, this.#clock()) + CHUNK_SLACK_MS,
    };
    const ops = commitGroups(keys, parts).map((group) => {
      const op = this.#kv.atomic();
      for (const i of group) op.set(keys[i]!, parts[i]!, options);
      return op;
    });
    const results = await Promise.allSettled(
      ops.map((op) => unlocked(() => op.commit())),
    );
    for (const result of results) {
      if (result.status === "rejected") throw result.reason;
    }
  }

  /** Deletes the chunks a replaced record's token left, best effort. */
  async #dropTokenChunks(slot: string, previous: KvRecord): Promise<void> {
    if (previous.state === "completed" && !("set" in previous)) return;
    try {
      await this.#deleteKeys(
        await this.#listKeys(this.#tokenChunksPrefix(slot, previous.token)),
      );
    } catch {
      // Best effort: what is left expires a minute after its record.
    }
  }

  async #listKeys(prefix: Deno.KvKey): Promise<Deno.KvKey[]> {
    return await unlocked(async () => {
      const keys: Deno.KvKey[] = [];
      for await (const entry of this.#kv.list({ prefix })) keys.push(entry.key);
      return keys;
    });
  }

  /** Deletes keys in batches, best effort: failures are left to expiry. */
  async #deleteKeys(keys: Deno.KvKey[]): Promise<void> {
    const commits: Promise<unknown>[] = [];
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      const op = this.#kv.atomic();
      for (const key of keys.slice(i, i + DELETE_BATCH)) op.delete(key);
      commits.push(unlocked(() => op.commit()));
    }
    await Promise.allSettled(commits);
  }
}

/** Attempts of one Deno KV call that SQLite answers "database is locked". */
const LOCKED_ATTEMPTS = 10;

/**
 * Runs a Deno KV call, again after a short random pause while a local
 * database file is locked by another handle (another process, or another
 * `Deno.openKv` of the same path): SQLite refuses such a call before doing
 * anything, so repeating it is safe.
 */
async function unlocked<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (
        attempt >= LOCKED_ATTEMPTS ||
        !String((error as Error)?.message).includes("database is locked")
      ) throw error;
      const ms = Math.random() * Math.min(50, 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
  }
}

function contended(operation: StoreOperation, slot: string): StoreError {
  return new StoreError(
    `Deno KV stayed contended on slot ${
      JSON.stringify(slot)
    } after ${MAX_ATTEMPTS} attempts`,
    { operation },
  );
}

/** The in-flight record `token` owns at `now`, or `null` when it owns none. */
function owns(found: Found, token: string, now: number): InFlightRecord | null {
  if (found.kind !== "record") return null;
  const record = found.record;
  if (
    record.state !== "in_flight" || record.token !== token ||
    now >= record.deadline
  ) return null;
  return record;
}

/** `expireIn` for a record whose deadline is `deadline`: at least 1 ms. */
function expireIn(deadline: number, now: number): number {
  return Math.max(1, Math.ceil(deadline - now));
}
