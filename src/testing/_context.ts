// Copyright 2026 the @idempotent/http authors. MIT license.
/** The conformance suite's types and the context its cases share. @module */

import assert from "node:assert/strict";
import { within } from "../_async.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  IdempotencyStore,
  PeekResult,
  StoredResponse,
  StoreStats,
} from "../store.ts";

/** A kind of value that no store wrote: what `poison` plants at a slot. */
export type PoisonKind = "garbage" | "truncated" | "future_version";

/** What a store's setup hands the suite. */
export interface ConformanceHarness {
  /** The store under test. */
  store: IdempotencyStore;
  /** Lets `ms` pass on the store's clock: advances an injected clock, or sleeps. */
  elapse(ms: number): Promise<void>;
  /**
   * Moves the store's injected clock forward by exactly `ms`, no real time
   * passing: it enables the cases on exact lease and TTL ends. Omit it for a
   * store that reads a server's clock (Redis, PostgreSQL).
   */
  advanceClock?: (ms: number) => Promise<void>;
  /**
   * Writes at `slot` a value no store wrote: random bytes (`garbage`), a
   * record cut short (`truncated`) or of a later version (`future_version`).
   * Omit it for a store that cannot hold one (the MemoryStore).
   */
  poison?: (slot: string, kind: PoisonKind) => Promise<void>;
  /** Frees what setup made: connections, keys, tables. */
  teardown?: () => Promise<void>;
}

/**
 * Runs one case of the suite: by default in line, stopping at the first
 * failure; {@linkcode storeConformance} passes `t.step`.
 */
export type ConformanceStep = (
  name: string,
  fn: () => Promise<void>,
) => Promise<unknown>;

/** How {@linkcode checkStoreConformance} runs the suite against one store. */
export interface ConformanceCheck {
  /** The lease of the cases that wait for expiry, in ms: long enough that a
   * store operation finishes well within it.
   * @default {200} */
  leaseMs?: number;
  /** The names of the cases to run, as their steps are named; a name that is
   * no case's is a `TypeError`.
   * @default {every case} */
  only?: readonly string[];
  /** Makes the store, once for the suite. */
  setup(): Promise<ConformanceHarness>;
  /** Runs each case.
   * @default {in line, rejecting at the first failure with the case's name} */
  step?: ConformanceStep;
}

/**
 * How {@linkcode storeConformance} registers the suite for one store: as
 * {@linkcode ConformanceCheck}, each case a `t.step`.
 */
export interface ConformanceOptions extends Omit<ConformanceCheck, "step"> {
  /** The store's name in test names, such as `"RedisStore (ioredis)"`. */
  name: string;
  /** `false`, or the reason the suite is ignored (shown in the test name).
   * @default {false} */
  ignore?: false | string;
}

/** What a case needs beyond the four operations and `elapse`. */
export type Need =
  | "advanceClock"
  | "poison"
  | "waitForChange"
  | "peek"
  | "forget"
  | "stats";

export const HAS: Record<Need, (h: ConformanceHarness) => boolean> = {
  advanceClock: (h) => Boolean(h.advanceClock),
  poison: (h) => Boolean(h.poison),
  waitForChange: (h) => Boolean(h.store.waitForChange),
  peek: (h) => typeof h.store.peek === "function",
  forget: (h) => typeof h.store.forget === "function",
  stats: (h) => typeof h.store.stats === "function",
};

/** The needs a store of this package always meets: unmet, a case's skip is shown. */
export const SHOWN_NEEDS: ReadonlySet<Need> = new Set([
  "peek",
  "forget",
  "stats",
]);

/** One case of the suite. */
export interface ConformanceCase {
  /** What the store must do: the case's step name, and what `only` selects. */
  name: string;
  /** What the case uses beyond the four operations: unmet, it is skipped. */
  needs?: readonly Need[];
  /** Runs the case's assertions against the context's store. */
  run(c: CaseContext): Promise<void>;
}

/** The lease of a claim that must outlive its case (a slow disk outlasts a
 * short one); half the cases' TTL, so that a wait from the TTL stands out. */
export const HELD = 30_000;

/** What every case runs with; fields, so that a case takes apart what it uses. */
export class CaseContext {
  readonly store: IdempotencyStore;
  /** What every slot of this run begins with. */
  readonly prefix: string = `conf:${crypto.randomUUID().slice(0, 8)}:`;
  #slots = 0;

  /** `lease`: the lease of the cases that wait for expiry, in ms. */
  constructor(readonly h: ConformanceHarness, readonly lease: number) {
    this.store = h.store;
  }

  /** A slot no case has used yet. */
  readonly slot = (): string => `${this.prefix}${++this.#slots}`;

  /** Claim options: the suite's lease and TTL, unless `more` says otherwise. */
  readonly opts = (fp: string, more?: Partial<ClaimOptions>): ClaimOptions => {
    return { fingerprint: fp, leaseMs: this.lease, ttlMs: 60_000, ...more };
  };
  readonly elapse = (ms: number): Promise<void> => this.h.elapse(ms);
  readonly advance = (ms: number): Promise<void> =>
    needed(this.h.advanceClock, "advanceClock")(ms);
  readonly poison = (slot: string, kind: PoisonKind): Promise<void> =>
    needed(this.h.poison, "poison")(slot, kind);
  /** The store's `peek`, `forget` and `stats`, which the case needs. */
  readonly peek = (slot: string): Promise<PeekResult> =>
    needed(this.store.peek, "peek").call(this.store, slot);
  readonly forget = (slot: string): Promise<ForgetResult> =>
    needed(this.store.forget, "forget").call(this.store, slot);
  readonly stats = (options?: { limit?: number }): Promise<StoreStats> =>
    needed(this.store.stats, "stats").call(this.store, options);
  readonly watch = (slot: string, signal: AbortSignal): Promise<void> => {
    const watch = needed(this.store.waitForChange, "waitForChange");
    return watch.call(this.store, slot, signal);
  };

  /** A fresh slot, and the token of its claim (which must be acquired). */
  readonly claimed = async (
    fingerprint: string,
    more?: Partial<ClaimOptions>,
  ): Promise<[slot: string, token: string]> => {
    const s = this.slot();
    const result = await this.store.claim(s, this.opts(fingerprint, more));
    return [s, acquired(result)];
  };

  /** `count` claims on `s` at once, the i-th with fingerprint `${tag}-${i}`
   * (and a lease of `leaseMs`): their results, and the indexes of those
   * acquired. */
  readonly claimAll = async (
    s: string,
    count: number,
    tag: string,
    leaseMs: number = this.lease,
  ): Promise<{ results: ClaimResult[]; winners: number[] }> => {
    const claim = (_: unknown, i: number) =>
      this.store.claim(s, this.opts(`${tag}-${i}`, { leaseMs }));
    const results = await Promise.all(Array.from({ length: count }, claim));
    const winners = results.flatMap((r, i) =>
      r.state === "acquired" ? [i] : []
    );
    return { results, winners };
  };

  /** The slot's next claim replays `response`. */
  readonly assertReplays = async (
    s: string,
    fingerprint: string,
    response: StoredResponse,
  ): Promise<void> =>
    assertSameResponse(
      completedResponse(await this.store.claim(s, this.opts(fingerprint))),
      response,
    );

  /** Extending, releasing and completing with `token` are all lost. */
  readonly assertWritesLost = async (
    s: string,
    token: string,
    response: StoredResponse,
  ): Promise<void> => {
    assert.equal(await this.store.extend(s, token, this.lease), "lost");
    assert.equal(await this.store.release(s, token), "lost");
    assert.equal(await this.store.complete(s, token, response), "lost");
  };
}

function needed<T>(value: T | undefined, need: Need): T {
  if (!value) throw new TypeError(`This case needs ${need}`);
  return value;
}

export const bytes = (text: string): Uint8Array<ArrayBuffer> =>
  new TextEncoder().encode(text);

/** Deterministic bytes covering every octet value. */
export function pattern(length: number, seed = 7): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = (x >>> 0) & 0xff;
  }
  return out;
}

export function plain(text: string): StoredResponse {
  return { status: 200, headers: [], body: bytes(text) };
}

/** The token of an acquired claim; fails on any other result. */
export function acquired(result: ClaimResult): string {
  return inState(result, "acquired").token;
}

/** The response of a completed claim; fails on any other result. */
export function completedResponse(result: ClaimResult): StoredResponse {
  return inState(result, "completed").response;
}

function inState<S extends ClaimResult["state"]>(
  result: ClaimResult,
  state: S,
) {
  const seen = JSON.stringify(result);
  assert.equal(result.state, state, `expected ${state}, got ${seen}`);
  return result as Extract<ClaimResult, { state: S }>;
}

/** `actual` has `expected`'s status, headers and body (or omission). */
export function assertSameResponse(
  actual: StoredResponse,
  expected: StoredResponse,
): void {
  assert.equal(actual.status, expected.status);
  assert.deepEqual(actual.headers, expected.headers);
  if (expected.body === null) {
    assert.equal(actual.body, null);
    assert.equal(actual.omitted, expected.omitted);
  } else {
    assert.ok(actual.body instanceof Uint8Array, "body must be a Uint8Array");
    assert.equal(actual.body.byteLength, expected.body.byteLength);
    const same = actual.body.every((x, i) => x === expected.body![i]);
    assert.ok(same, "body bytes differ");
    assert.equal(actual.omitted, undefined);
  }
}

/** Waits for `promise`, failing instead of hanging after 10 s (a bound, not a timing). */
export async function resolves(
  promise: Promise<void>,
  what: string,
): Promise<void> {
  const resolved = await within(promise.then(() => true), 10_000);
  if (!resolved) throw new Error(`${what} did not resolve`);
}
