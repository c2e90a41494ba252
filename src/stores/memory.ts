// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode MemoryStore}: the store contract for one process, bounded in
 * entries and in body bytes.
 *
 * @module
 */

import { assertSlot, StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse } from "../record.ts";
import { positiveInteger } from "../_validate.ts";

/** Options of the {@linkcode MemoryStore} constructor. */
export interface MemoryStoreOptions {
  /**
   * The most records held at once, in flight and completed.
   *
   * Past it, a new claim makes room by forgetting a claim whose lease ran
   * out, else the completed record nearest its expiry: a retry of a key so
   * forgotten runs the handler again. Size it for your keyed requests over a
   * `ttl` (the default covers about one a second for 24 hours).
   *
   * @default {100_000}
   */
  maxEntries?: number;
  /**
   * The most bytes of completed records (bodies and headers) held at once.
   * Past it, the bodies of the records nearest their expiry are dropped
   * first: those records stay, and a retry gets their status and headers
   * with an empty body (`too_large`), never a second execution. A single
   * record larger than this is kept without its body from the start.
   *
   * @default {67_108_864} (64 MiB)
   */
  maxBytes?: number;
  /**
   * The clock, in milliseconds: inject one to test expiry without waiting.
   *
   * @default {Date.now}
   */
  clock?: () => number;
}

type Entry =
  | {
    state: "in_flight";
    fingerprint: string;
    token: string;
    leaseUntil: number;
    deadline: number;
  }
  | {
    state: "completed";
    fingerprint: string;
    response: StoredResponse;
    deadline: number;
    bytes: number;
  };

interface HeapItem {
  /** When the entry stops being worth keeping: its deadline, or for a claim the end of its lease if sooner. */
  key: number;
  slot: string;
  entry: Entry;
}

/**
 * Keeps idempotency records in this process's memory: the default store,
 * right for a single instance and for tests. Records are lost when the
 * process exits, and other instances do not see them; use `KvStore`,
 * `RedisStore` or `PostgresStore` for those cases.
 *
 * Memory is bounded by `maxEntries` and `maxBytes`. Under byte pressure it
 * drops the bodies of the completed records nearest their expiry, keeping
 * the records (their keys still replay, without a body). When a new claim
 * needs an entry, it forgets a claim whose lease ran out, else the completed
 * record nearest its expiry (a retry of that key then runs again); a live
 * claim is never evicted, and when every record held is a live claim, a new
 * claim is refused with a {@linkcode StoreError} (the middleware answers
 * 503). Expired records never block and are dropped as they are met.
 *
 * Bodies are held by reference, not copied: do not change a body after
 * handing it to `complete`, nor one a claim returned.
 *
 * @example Claim, complete, replay
 * ```ts
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let now = 0;
 * const store = new MemoryStore({ maxEntries: 100, clock: () => now });
 * const options = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 60_000 };
 *
 * const first = await store.claim("slot", options);
 * assert.equal(first.state, "acquired");
 * assert.equal((await store.claim("slot", options)).state, "in_flight");
 * if (first.state === "acquired") {
 *   await store.complete("slot", first.token, { status: 201, headers: [], body: new Uint8Array([7]) });
 * }
 * const replay = await store.claim("slot", options);
 * assert.equal(replay.state, "completed");
 *
 * now += 60_000; // the TTL ran out: the slot is free again
 * assert.equal((await store.claim("slot", options)).state, "acquired");
 * ```
 */
export class MemoryStore implements IdempotencyStore {
  #entries = new Map<string, Entry>();
  /** Claims in flight, soonest to stop being live first. */
  #claims: HeapItem[] = [];
  /** Completed records, nearest their deadline first. */
  #records: HeapItem[] = [];
  /** Completed records that hold a body, nearest their deadline first. */
  #bodies: HeapItem[] = [];
  #bytes = 0;
  #maxEntries: number;
  #maxBytes: number;
  #clock: () => number;

  /**
   * Makes an empty store.
   *
   * @param options Its bounds and clock.
   * @throws {RangeError} When a bound is not a positive integer.
   * @throws {TypeError} When `clock` is not a function.
   */
  constructor(options: MemoryStoreOptions = {}) {
    this.#maxEntries = positiveInteger(
      "maxEntries",
      options.maxEntries ?? 100_000,
    );
    this.#maxBytes = positiveInteger(
      "maxBytes",
      options.maxBytes ?? 67_108_864,
    );
    const clock = options.clock ?? Date.now;
    if (typeof clock !== "function") {
      throw new TypeError(
        `'clock' must be a function: current value is ${clock}`,
      );
    }
    this.#clock = clock;
  }

  /** How many records the store holds, expired ones not yet dropped included. */
  get size(): number {
    return this.#entries.size;
  }

  /** How many bytes of completed records the store holds. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Reserves the slot if it is free, or reports what holds it.
   *
   * @param slot The slot.
   * @param options The fingerprint, lease and TTL.
   * @returns What the claim found.
   * @throws {StoreError} When every record held is a live claim and the store is full.
   */
  claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    try {
      return Promise.resolve(this.#claim(slot, options));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #claim(slot: string, options: ClaimOptions): ClaimResult {
    assertSlot(slot);
    const leaseMs = positiveInteger("leaseMs", options.leaseMs);
    const ttlMs = positiveInteger("ttlMs", options.ttlMs);
    const now = this.#clock();
    let entry = this.#entries.get(slot);
    if (entry !== undefined && entry.deadline <= now) {
      this.#drop(slot, entry);
      entry = undefined;
    }
    if (entry?.state === "completed") {
      return {
        state: "completed",
        fingerprint: entry.fingerprint,
        response: entry.response,
      };
    }
    if (entry !== undefined && entry.leaseUntil > now) {
      return {
        state: "in_flight",
        fingerprint: entry.fingerprint,
        retryAfterMs: Math.max(1, Math.ceil(entry.leaseUntil - now)),
      };
    }
    const recovered = entry !== undefined;
    if (entry !== undefined) this.#drop(slot, entry);
    else this.#makeRoom(now);
    const next: Entry = {
      state: "in_flight",
      fingerprint: options.fingerprint,
      token: crypto.randomUUID(),
      leaseUntil: now + leaseMs,
      deadline: now + ttlMs,
    };
    this.#put(slot, next);
    return { state: "acquired", token: next.token, recovered };
  }

  /**
   * Records the response, if `token` still owns the slot.
   *
   * @param slot The slot.
   * @param token The claim's token.
   * @param response The response to replay.
   * @returns `applied` or `lost`.
   * @throws {TypeError} When the response is malformed.
   */
  complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    try {
      assertSlot(slot);
      assertStoredResponse(response);
      const entry = this.#owned(slot, token);
      if (entry === undefined) return Promise.resolve("lost");
      let size = headerBytes(response.headers);
      let kept = response;
      if (size + (response.body?.byteLength ?? 0) > this.#maxBytes) {
        kept = {
          status: response.status,
          headers: response.headers,
          body: null,
          omitted: "too_large",
        };
      } else size += response.body?.byteLength ?? 0;
      this.#drop(slot, entry);
      this.#makeBytes(size);
      this.#put(slot, {
        state: "completed",
        fingerprint: entry.fingerprint,
        response: kept,
        deadline: entry.deadline,
        bytes: size,
      });
      return Promise.resolve("applied");
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Frees the slot, if `token` still owns it.
   *
   * @param slot The slot.
   * @param token The claim's token.
   * @returns `applied` or `lost`.
   */
  release(slot: string, token: string): Promise<WriteOutcome> {
    try {
      assertSlot(slot);
      const entry = this.#owned(slot, token);
      if (entry === undefined) return Promise.resolve("lost");
      this.#drop(slot, entry);
      return Promise.resolve("applied");
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Renews the lease to `leaseMs` from now, if `token` still owns the slot.
   *
   * @param slot The slot.
   * @param token The claim's token.
   * @param leaseMs The new lease.
   * @returns `applied` or `lost`.
   */
  extend(slot: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    try {
      assertSlot(slot);
      positiveInteger("leaseMs", leaseMs);
      const entry = this.#owned(slot, token);
      if (entry === undefined) return Promise.resolve("lost");
      entry.leaseUntil = this.#clock() + leaseMs;
      return Promise.resolve("applied");
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The live in-flight entry that `token` owns, if any. */
  #owned(slot: string, token: string) {
    const entry = this.#entries.get(slot);
    if (
      entry === undefined || entry.state !== "in_flight" ||
      entry.token !== token || entry.deadline <= this.#clock()
    ) return undefined;
    return entry;
  }

  #put(slot: string, entry: Entry): void {
    this.#entries.set(slot, entry);
    if (entry.state === "completed") this.#bytes += entry.bytes;
    if (
      this.#claims.length + this.#records.length + this.#bodies.length >
        3 * this.#entries.size + 64
    ) {
      this.#rebuildHeaps();
    }
    this.#track(slot, entry);
  }

  #drop(slot: string, entry: Entry): void {
    if (this.#entries.get(slot) !== entry) return;
    this.#entries.delete(slot);
    if (entry.state === "completed") this.#bytes -= entry.bytes;
    // Its heap item goes stale: skipped when it surfaces, gone at the next rebuild.
  }

  /** Frees one entry's room when the store is full, or throws. */
  #makeRoom(now: number): void {
    if (this.#entries.size < this.#maxEntries) return;
    if (!this.#evict(now)) {
      throw new StoreError(
        `MemoryStore is full: all ${this.#entries.size} records are live claims (maxEntries is ${this.#maxEntries})`,
        { operation: "claim" },
      );
    }
  }

  /** Frees completed records until `size` more bytes fit; live claims hold no bytes. */
  #makeBytes(size: number): void {
    while (this.#bytes + size > this.#maxBytes && this.#shrinkRecord());
  }

  /**
   * Evicts one entry: a claim that is no longer live (its lease or its TTL
   * ran out) if there is one, else the completed record nearest its
   * deadline. Returns whether it found one. Both heaps make this O(log n):
   * a store full of live claims answers a new claim at once.
   */
  #evict(now: number): boolean {
    const claims = this.#claims;
    while (claims.length > 0) {
      const item = claims[0]!;
      const { entry } = item;
      if (
        this.#entries.get(item.slot) !== entry || entry.state !== "in_flight"
      ) {
        heapPop(claims); // stale: released, completed or replaced
        continue;
      }
      const key = Math.min(entry.leaseUntil, entry.deadline);
      if (key > item.key) {
        heapPop(claims); // extended since: file it under its new key
        heapPush(claims, { key, slot: item.slot, entry });
        continue;
      }
      if (key <= now) {
        heapPop(claims);
        this.#drop(item.slot, entry);
        return true;
      }
      break; // the soonest claim is live: so are all the others
    }
    return this.#evictRecord();
  }

  /** Evicts the completed record nearest its deadline; returns whether there was one. */
  #evictRecord(): boolean {
    const records = this.#records;
    while (records.length > 0) {
      const item = heapPop(records)!;
      if (this.#entries.get(item.slot) !== item.entry) continue; // stale
      this.#drop(item.slot, item.entry);
      return true;
    }
    return false;
  }

  /**
   * Drops the body of the completed record nearest its deadline that still
   * holds one, keeping the record itself (as `too_large`): its key is still
   * answered, with status and headers, and never runs again. Returns whether
   * there was a body to drop.
   */
  #shrinkRecord(): boolean {
    const bodies = this.#bodies;
    while (bodies.length > 0) {
      const { slot, entry } = heapPop(bodies)!;
      if (
        this.#entries.get(slot) !== entry || entry.state !== "completed" ||
        entry.response.body === null
      ) continue; // stale
      const { status, headers } = entry.response;
      this.#drop(slot, entry);
      this.#put(slot, {
        ...entry,
        response: { status, headers, body: null, omitted: "too_large" },
        bytes: headerBytes(headers),
      });
      return true;
    }
    return false;
  }

  #track(slot: string, entry: Entry): void {
    if (entry.state === "completed") {
      heapPush(this.#records, { key: entry.deadline, slot, entry });
      if (entry.response.body !== null) {
        heapPush(this.#bodies, { key: entry.deadline, slot, entry });
      }
    } else {
      heapPush(this.#claims, {
        key: Math.min(entry.leaseUntil, entry.deadline),
        slot,
        entry,
      });
    }
  }

  #rebuildHeaps(): void {
    this.#claims = [];
    this.#records = [];
    this.#bodies = [];
    for (const [slot, entry] of this.#entries) this.#track(slot, entry);
  }
}

function headerBytes(headers: readonly [string, string][]): number {
  let size = 0;
  for (const [name, value] of headers) size += name.length + value.length;
  return size;
}

function heapPush(heap: HeapItem[], item: HeapItem): void {
  let i = heap.push(item) - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (heap[parent]!.key <= item.key) break;
    heap[i] = heap[parent]!;
    i = parent;
  }
  heap[i] = item;
}

function heapPop(heap: HeapItem[]): HeapItem | undefined {
  const top = heap[0];
  const last = heap.pop();
  if (top === undefined || last === undefined || heap.length === 0) return top;
  let i = 0;
  for (;;) {
    const left = 2 * i + 1;
    if (left >= heap.length) break;
    const right = left + 1;
    const child = right < heap.length && heap[right]!.key < heap[left]!.key
      ? right
      : left;
    if (heap[child]!.key >= last.key) break;
    heap[i] = heap[child]!;
    i = child;
  }
  heap[i] = last;
  return top;
}
