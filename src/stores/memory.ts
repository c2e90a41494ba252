// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file require-await -- `async` makes a throw a rejection
/**
 * {@linkcode MemoryStore}: the store contract for one process.
 *
 * @module
 */

import { assertSlot, claimOptions, durationMs, StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  OmittedReason,
  StoredResponse,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { optionalFunction, positiveInteger } from "../_validate.ts";

/** Options of the {@linkcode MemoryStore} constructor. */
export interface MemoryStoreOptions {
  /** The most records held at once, in flight and completed: 100,000 by default. */
  maxEntries?: number;
  /** The most bytes counted ({@linkcode MemoryStore.bytes}): 64 MiB by default. */
  maxBytes?: number;
  /** The clock, in milliseconds (`Date.now` by default): inject one to test expiry. */
  clock?: () => number;
}

/** Characters of a slot, and of a fingerprint, that the overhead covers. */
const KEY_CHARS = 64;
/** A character that makes a string take two bytes a character. */
const WIDE = /[\u0100-\uffff]/;
/** Tokens are unique in the process: a counter, shorter than a UUID. */
let lastToken = 0;

/** A claim in flight; `bytes` is what it counts against `maxBytes`, `at` its place in its heap. */
class Claim {
  at = -1;
  leaseUntil = 0;
  constructor(
    readonly slot: string,
    readonly fingerprint: string,
    readonly deadline: number,
    readonly bytes: number,
    readonly token: string,
  ) {}
}

/** A completed record: its own copy of the response, its header pairs as JSON. */
class Done {
  at = -1;
  body: Uint8Array<ArrayBuffer> | null = null;
  omitted: OmittedReason = "too_large";
  constructor(
    readonly slot: string,
    readonly fingerprint: string,
    readonly deadline: number,
    public bytes: number,
    readonly status: number,
    readonly headers: string,
  ) {}
}

/**
 * Keeps idempotency records in this process's memory: the default store,
 * right for one instance and for tests (records go with the process, and
 * other instances do not see them).
 *
 * Memory is bounded, after GC, by `maxBytes + maxEntries ×`
 * {@linkcode MemoryStore.RECORD_OVERHEAD_BYTES} ("bounded memory" in
 * `docs/architecture.md`). A record counts against `maxBytes` its body, its
 * header list as JSON, and its slot's and fingerprint's characters past 64
 * (twice that in a string with a character past U+00FF); the overhead is
 * the rest. The store keeps its own copy of both lists and bodies, and a
 * replay's body is that copy: do not change it. Under byte pressure the
 * completed records nearest their expiry lose their bodies first (a retry
 * gets status and headers, `too_large`, never a second run), then are
 * forgotten. A completion is never refused: one whose header list does not
 * fit beside the live claims passes `maxBytes`.
 *
 * Past `maxEntries`, a new claim forgets a claim whose lease ran out, else
 * the completed record nearest its expiry (a retry of it runs again: size
 * `maxEntries` for your keyed requests over a `ttl`). A live claim is never
 * evicted: when all records are, a claim is refused with a
 * {@linkcode StoreError} (503). Expired records never block and are
 * dropped as they are met.
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
  /** The most bytes a record holds after GC beside what it counts against `maxBytes`. */
  static readonly RECORD_OVERHEAD_BYTES: number = 640;

  #entries = new Map<string, Claim | Done>();
  #claims = new Heap<Claim>(liveUntil);
  #withBody = new Heap<Done>((done) => done.deadline);
  #bodiless = new Heap<Done>((done) => done.deadline);
  #bytes = 0;
  #maxEntries: number;
  #maxBytes: number;
  #clock: () => number;

  /** Makes an empty store; throws a RangeError or TypeError on a bad option. */
  constructor(options: MemoryStoreOptions = {}) {
    const { maxEntries, maxBytes, clock } = options;
    this.#maxEntries = positiveInteger("maxEntries", maxEntries ?? 100_000);
    this.#maxBytes = positiveInteger("maxBytes", maxBytes ?? 67_108_864);
    this.#clock = optionalFunction("clock", clock ?? undefined) ?? Date.now;
  }

  /** How many records the store holds, expired ones not yet dropped included. */
  get size(): number {
    return this.#entries.size;
  }

  /** How many bytes the store counts against `maxBytes`. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Reserves the slot if it is free, or reports what holds it. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    const now = this.#clock();
    let entry = this.#entries.get(slot);
    if (entry !== undefined && entry.deadline <= now) {
      this.#drop(entry);
      entry = undefined;
    }
    if (entry instanceof Done) {
      const response = responseOf(entry);
      return { state: "completed", fingerprint: entry.fingerprint, response };
    }
    if (entry !== undefined && entry.leaseUntil > now) {
      const { fingerprint } = entry;
      const retryAfterMs = Math.max(1, Math.ceil(entry.leaseUntil - now));
      return { state: "in_flight", fingerprint, retryAfterMs };
    }
    const recovered = entry !== undefined;
    if (entry !== undefined) this.#drop(entry);
    else this.#makeRoom(now);
    const bytes = keyBytes(slot) + keyBytes(fingerprint);
    if (bytes > 0 && !this.#makeBytes(bytes, now)) {
      throw new StoreError(
        `MemoryStore is full: live claims hold ${this.#bytes} bytes of keys (maxBytes is ${this.#maxBytes})`,
        { operation: "claim" },
      );
    }
    const token = (++lastToken).toString(36);
    const claim = new Claim(slot, fingerprint, now + ttlMs, bytes, token);
    claim.leaseUntil = now + leaseMs;
    this.#entries.set(slot, claim);
    this.#bytes += bytes;
    this.#claims.push(claim);
    return { state: "acquired", token, recovered };
  }

  /** Records a copy of the response, if `token` still owns the slot. */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    const now = this.#clock();
    const claim = this.#owned(slot, token, now);
    if (claim === undefined) return "lost";
    this.#claims.remove(claim);
    const { status, body, omitted } = response;
    const headers = JSON.stringify(response.headers);
    const { fingerprint, deadline } = claim;
    const bytes = claim.bytes + headers.length;
    const done = new Done(slot, fingerprint, deadline, bytes, status, headers);
    if (omitted !== undefined) done.omitted = omitted;
    this.#entries.set(slot, done);
    this.#bytes += headers.length;
    const size = body?.byteLength ?? 0;
    if (
      body !== null && done.bytes + size <= this.#maxBytes &&
      this.#makeBytes(size, now)
    ) {
      done.body = new Uint8Array(body);
      done.bytes += size;
      this.#bytes += size;
      this.#withBody.push(done);
    } else {
      this.#makeBytes(0, now); // room for the header list, if it can be made
      this.#bodiless.push(done);
    }
    return "applied";
  }

  /** Frees the slot, if `token` still owns it. */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    const claim = this.#owned(slot, token, this.#clock());
    if (claim === undefined) return "lost";
    this.#drop(claim);
    return "applied";
  }

  /** Renews the lease to `leaseMs` from now, if `token` still owns the slot. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    leaseMs = durationMs("leaseMs", leaseMs);
    const now = this.#clock();
    const claim = this.#owned(slot, token, now);
    if (claim === undefined) return "lost";
    claim.leaseUntil = now + leaseMs;
    this.#claims.update(claim);
    return "applied";
  }

  /** The live claim that `token` owns, if any. */
  #owned(slot: string, token: string, now: number): Claim | undefined {
    const entry = this.#entries.get(slot);
    if (
      !(entry instanceof Claim) || entry.token !== token ||
      entry.deadline <= now
    ) return undefined;
    return entry;
  }

  /** Forgets an entry, and every reference the store holds to it. */
  #drop(entry: Claim | Done): void {
    this.#entries.delete(entry.slot);
    this.#bytes -= entry.bytes;
    if (entry instanceof Claim) this.#claims.remove(entry);
    else if (entry.body === null) this.#bodiless.remove(entry);
    else this.#withBody.remove(entry);
  }

  /** Frees one of the `maxEntries` when the store is full, or throws. */
  #makeRoom(now: number): void {
    if (this.#entries.size < this.#maxEntries) return;
    const claim = this.#claims.peek();
    if (claim !== undefined && liveUntil(claim) <= now) {
      return this.#drop(claim); // its lease or its TTL ran out
    }
    const record = sooner(this.#withBody.peek(), this.#bodiless.peek());
    if (record === undefined) {
      throw new StoreError(
        `MemoryStore is full: all ${this.#entries.size} records are live claims (maxEntries is ${this.#maxEntries})`,
        { operation: "claim" },
      );
    }
    this.#drop(record);
  }

  /** Makes `size` more bytes fit, if dropping bodies and records can. */
  #makeBytes(size: number, now: number): boolean {
    while (this.#bytes + size > this.#maxBytes) {
      const done = this.#withBody.peek() ?? this.#bodiless.peek();
      if (done === undefined) return false;
      if (done.body === null || done.deadline <= now) this.#drop(done);
      else this.#dropBody(done);
    }
    return true;
  }

  /** Drops a record's body, keeping the record as `too_large`. */
  #dropBody(done: Done): void {
    this.#withBody.remove(done);
    this.#bodiless.push(done);
    done.bytes -= done.body!.byteLength;
    this.#bytes -= done.body!.byteLength;
    done.body = null;
    done.omitted = "too_large";
  }
}

/** A claim stops being live at the end of its lease, or of its TTL if sooner. */
function liveUntil(claim: Claim): number {
  return Math.min(claim.leaseUntil, claim.deadline);
}

/** Of two records, the one that expires first. */
function sooner(a: Done | undefined, b: Done | undefined): Done | undefined {
  return a === undefined || (b !== undefined && b.deadline < a.deadline)
    ? b
    : a;
}

/** What a slot or fingerprint counts against `maxBytes`. */
function keyBytes(key: string): number {
  if (key.length <= KEY_CHARS) return 0;
  return WIDE.test(key) ? 2 * key.length - KEY_CHARS : key.length - KEY_CHARS;
}

/** A record as a claim hands it out, with a frozen header list of its own. */
function responseOf(done: Done): StoredResponse {
  const pairs = JSON.parse(done.headers) as [string, string][];
  const headers = Object.freeze(pairs.map((pair) => Object.freeze(pair)));
  const { status, body, omitted } = done;
  return body === null
    ? { status, headers: headers as [string, string][], body, omitted }
    : { status, headers: headers as [string, string][], body };
}

/**
 * A binary min-heap of entries by `orderBy`. Each entry sits in one heap at
 * a time and knows its place there (`at`), so that any entry leaves in
 * O(log n) and none stays referenced once it left.
 */
class Heap<T extends { at: number }> {
  #items: T[] = [];
  constructor(readonly orderBy: (item: T) => number) {}

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    this.#items.push(item);
    this.update(item, this.#items.length - 1);
  }

  remove(item: T): void {
    const last = this.#items.pop()!;
    if (last !== item) this.update(last, item.at);
    item.at = -1;
  }

  /** Moves `item`, now at `at`, up or down to where its key belongs. */
  update(item: T, at = item.at): void {
    const items = this.#items;
    const key = this.orderBy(item);
    while (at > 0 && this.orderBy(items[(at - 1) >> 1]!) > key) {
      at = this.#put(items[(at - 1) >> 1]!, at);
    }
    for (let child = 2 * at + 1; child < items.length; child = 2 * at + 1) {
      const right = items[child + 1];
      if (right && this.orderBy(right) < this.orderBy(items[child]!)) child++;
      if (this.orderBy(items[child]!) >= key) break;
      at = this.#put(items[child]!, at);
    }
    this.#put(item, at);
  }

  /** Puts `item` at `at`, and returns where it was. */
  #put(item: T, at: number): number {
    const from = item.at;
    item.at = at;
    this.#items[at] = item;
    return from;
  }
}
