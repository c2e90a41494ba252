// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file require-await -- `async` makes a throw a rejection
/** {@linkcode MemoryStore}: the store contract for one process. @module */

import { assertSlot, StoreError } from "../store.ts";
import {
  claimOptions,
  completedPeek,
  durationMs,
  inFlightPeek,
  STORE_DROPPED,
} from "./_shared.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  IdempotencyStore,
  OmittedReason,
  PeekOptions,
  PeekResult,
  StoredResponse,
  StoreStats,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { SealCount } from "../_seal.ts";
import {
  knownOptions,
  optionalFunction,
  positiveInteger,
} from "../_validate.ts";

/** Options of the {@linkcode MemoryStore} constructor. */
export interface MemoryStoreOptions {
  /** The most records held at once, in flight and completed: 100,000 by default. */
  maxEntries?: number;
  /** The most bytes counted ({@linkcode MemoryStore.bytes}): 64 MiB by default. */
  maxBytes?: number;
  /** The clock, in milliseconds (`Date.now` by default): inject one to test expiry. */
  clock?: () => number;
}

const MEMORY_OPTIONS = ["maxEntries", "maxBytes", "clock"];
const KEY_CHARS = 64; // of a slot or fingerprint, covered by the overhead
const WIDE = /[\u0100-\uffff]/; // a string with one takes two bytes a character
let lastToken = 0; // tokens: a counter, unique in the process

/** A claim in flight; `bytes` is what it counts against `maxBytes`, `at` its place in its heap. */
class Claim {
  at = -1;
  constructor(
    readonly slot: string,
    readonly fingerprint: string,
    readonly deadline: number,
    readonly bytes: number,
    readonly token: string,
    public leaseUntil: number,
  ) {}
}

/** A completed record: its own copy of the response, its header pairs as JSON. */
class Done {
  at = -1;
  body: Uint8Array<ArrayBuffer> | null = null;
  omitted: OmittedReason = STORE_DROPPED; // a body given that did not fit
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
 * for one instance and for tests. Memory is bounded after GC by `maxBytes +
 * maxEntries ×` {@linkcode MemoryStore.RECORD_OVERHEAD_BYTES} (see Bounded
 * memory in docs/architecture.md): a record counts its body, its header list
 * as JSON, and its key characters past 64 (twice past U+00FF). Under byte
 * pressure the records nearest expiry lose their bodies (`store_dropped`), then
 * go; past `maxEntries`, an expired lease, else the record nearest expiry. A
 * live claim never goes: when all are, a claim fails ({@linkcode StoreError}).
 * A replay's body is the store's own copy: do not change it.
 *
 * @example Claim, complete, replay
 * ```ts
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let now = 0;
 * const store = new MemoryStore({ maxEntries: 100, clock: () => now });
 * const options = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 60_000 };
 * const first = await store.claim("slot", options);
 * assert.ok(first.state === "acquired");
 * assert.equal((await store.claim("slot", options)).state, "in_flight");
 * await store.complete("slot", first.token, { status: 201, headers: [], body: new Uint8Array([7]) });
 * assert.equal((await store.claim("slot", options)).state, "completed");
 * now += 60_000; // the TTL ran out: the slot is free again
 * assert.equal((await store.claim("slot", options)).state, "acquired");
 * ```
 */
export class MemoryStore implements IdempotencyStore {
  /** The most bytes a record holds after GC beside what it counts against `maxBytes`. */
  static readonly RECORD_OVERHEAD_BYTES: number = 640;

  #entries = new Map<string, Claim | Done>();
  #claims = new Heap<Claim>((c) => Math.min(c.leaseUntil, c.deadline));
  #withBody = new Heap<Done>((done) => done.deadline);
  #bodiless = new Heap<Done>((done) => done.deadline);
  #bytes = 0;
  #headers = "";
  #maxEntries: number;
  #maxBytes: number;
  #clock: () => number;

  /** Makes an empty store; throws a RangeError or TypeError on a bad or unknown option. */
  constructor(options: MemoryStoreOptions = {}) {
    knownOptions("MemoryStore", options ?? {}, MEMORY_OPTIONS);
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
    if (entry instanceof Done) return completed(entry);
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
      throw full(
        `live claims hold ${this.#bytes} bytes of keys (maxBytes is ${this.#maxBytes})`,
      );
    }
    const token = (++lastToken).toString(36);
    const lease = now + leaseMs;
    const claim = new Claim(
      slot,
      fingerprint,
      now + ttlMs,
      bytes,
      token,
      lease,
    );
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
    // Records with one header list share one string of it: less heap.
    const json = JSON.stringify(response.headers);
    if (json !== this.#headers) this.#headers = json;
    const headers = this.#headers;
    const { fingerprint, deadline } = claim;
    const bytes = claim.bytes + headers.length;
    const done = new Done(slot, fingerprint, deadline, bytes, status, headers);
    if (omitted !== undefined) done.omitted = omitted;
    this.#entries.set(slot, done);
    this.#bytes += headers.length;
    const size = body?.byteLength ?? 0;
    const fits = body !== null && done.bytes + size <= this.#maxBytes;
    if (fits && this.#makeBytes(size, now)) {
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

  /** What holds the slot, read only; `claimedAt` is not kept (`null`). */
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    const entry = this.#entries.get(slot);
    if (entry === undefined || entry.deadline <= this.#clock()) {
      return { state: "absent" };
    }
    const { fingerprint, deadline: expiresAt } = entry;
    if (entry instanceof Claim) {
      return inFlightPeek(fingerprint, entry.leaseUntil, expiresAt);
    }
    const pairs = JSON.parse(entry.headers) as [string, string][];
    return completedPeek(
      fingerprint,
      {
        status: entry.status,
        headerNames: pairs.map(([name]) => name),
        bodyBytes: entry.body?.byteLength ?? null,
        omitted: entry.omitted,
      },
      expiresAt,
      null,
      options?.response ? responseOf(entry) : undefined,
    );
  }

  /** Deletes what holds the slot, unfenced: `absent` when nothing live did. */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    const entry = this.#entries.get(slot);
    if (entry === undefined) return "absent";
    this.#drop(entry);
    return entry.deadline <= this.#clock() ? "absent" : "deleted";
  }

  /** Exact counts of the live records (`limit` is not needed). */
  async stats(_options?: { limit?: number }): Promise<StoreStats> {
    const now = this.#clock();
    let inFlight = 0;
    let completed = 0;
    const sealed = new SealCount();
    for (const entry of this.#entries.values()) {
      if (entry.deadline <= now) continue;
      if (entry instanceof Claim) inFlight++;
      else {
        completed++;
        sealed.add(entry.headers);
      }
    }
    return {
      inFlight,
      completed,
      unreadable: 0,
      exact: true,
      ...sealed.counts,
    };
  }

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
    const claim = this.#claims.items[0];
    if (claim !== undefined && this.#claims.orderBy(claim) <= now) {
      return this.#drop(claim); // its lease or its TTL ran out
    }
    const [a, b] = [this.#withBody.items[0], this.#bodiless.items[0]];
    const record = a === undefined || (b && b.deadline < a.deadline) ? b : a;
    if (record === undefined) {
      throw full(
        `all ${this.#entries.size} records are live claims (maxEntries is ${this.#maxEntries})`,
      );
    }
    this.#drop(record);
  }

  /** Makes `size` more bytes fit, if dropping bodies and records can. */
  #makeBytes(size: number, now: number): boolean {
    while (this.#bytes + size > this.#maxBytes) {
      const done = this.#withBody.items[0] ?? this.#bodiless.items[0];
      if (done === undefined) return false;
      if (done.body === null || done.deadline <= now) this.#drop(done);
      else this.#dropBody(done);
    }
    return true;
  }

  #dropBody(done: Done): void {
    this.#withBody.remove(done);
    this.#bodiless.push(done);
    done.bytes -= done.body!.byteLength;
    this.#bytes -= done.body!.byteLength;
    done.body = null;
    done.omitted = STORE_DROPPED; // not the middleware's reason: a seal does not cover it
  }
}

function full(why: string): StoreError {
  return new StoreError(`MemoryStore is full: ${why}`, { operation: "claim" });
}

function keyBytes(key: string): number {
  if (key.length <= KEY_CHARS) return 0;
  return WIDE.test(key) ? 2 * key.length - KEY_CHARS : key.length - KEY_CHARS;
}

/** A record as a claim hands it out, its header list frozen. */
function completed(done: Done): ClaimResult {
  return {
    state: "completed",
    fingerprint: done.fingerprint,
    response: responseOf(done),
  };
}

/** The record's response, its header list frozen. */
function responseOf(done: Done): StoredResponse {
  const pairs = JSON.parse(done.headers) as [string, string][];
  const frozen = Object.freeze(pairs.map((pair) => Object.freeze(pair)));
  const { status, body, omitted } = done;
  const headers = frozen as [string, string][];
  return body === null
    ? { status, headers, body, omitted }
    : { status, headers, body };
}

/** A binary min-heap by `orderBy`; an entry knows its place (`at`), so leaves in O(log n). */
class Heap<T extends { at: number }> {
  readonly items: T[] = [];
  constructor(readonly orderBy: (item: T) => number) {}

  push(item: T): void {
    this.update(item, this.items.push(item) - 1);
  }

  remove(item: T): void {
    const last = this.items.pop()!;
    if (last !== item) this.update(last, item.at);
    item.at = -1;
  }

  update(item: T, at = item.at): void {
    const items = this.items;
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

  /** Puts `item` at `at`; returns where it was. */
  #put(item: T, at: number): number {
    const from = item.at;
    item.at = at;
    this.items[at] = item;
    return from;
  }
}
