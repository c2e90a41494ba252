// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The conformance suite's types and what its cases share: the options of a
 * run and the harness a store's setup hands it (exported by `testing.ts`),
 * the shape of a case (`{ name, needs, run }`), and the context every case
 * runs with (fresh slots, claim options and the assertions several cases
 * make). The cases are the tables of `_conformance_claims.ts` and
 * `_conformance_edges.ts`; `testing.ts` runs them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { delay } from "./_async.ts";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
} from "./store.ts";

/** A kind of value that no store wrote: what `poison` plants at a slot. */
export type PoisonKind = "garbage" | "truncated" | "future_version";

/**
 * What a store's setup hands the suite.
 *
 * @example A harness for a store with an injected clock
 * ```ts
 * import type { ConformanceHarness } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let now = 0;
 * const harness: ConformanceHarness = {
 *   store: new MemoryStore({ clock: () => now }),
 *   elapse: (ms) => Promise.resolve(void (now += ms)),
 *   advanceClock: (ms) => Promise.resolve(void (now += ms)),
 * };
 * const options = { fingerprint: "f", leaseMs: 1_000, ttlMs: 60_000 };
 * assert.equal((await harness.store.claim("s", options)).state, "acquired");
 * await harness.advanceClock!(1_000);
 * assert.equal((await harness.store.claim("s", options)).state, "acquired");
 * ```
 */
export interface ConformanceHarness {
  /** The store under test. */
  store: IdempotencyStore;
  /** Lets `ms` pass on the store's clock: advances an injected clock, or sleeps. */
  elapse(ms: number): Promise<void>;
  /**
   * Moves the store's injected clock forward by exactly `ms`, with no real
   * time passing. Give it for a store that takes a clock: it enables the
   * cases on exact boundaries (a claim whose lease ends exactly now is free,
   * a record whose TTL ends exactly now is absent). Omit it for a store that
   * reads a server's clock (Redis, PostgreSQL).
   */
  advanceClock?: (ms: number) => Promise<void>;
  /**
   * Writes a value at `slot` that is not a record of ours: random bytes
   * (`garbage`), a record cut short (`truncated`), or a record of a later
   * format version (`future_version`). Omit it for stores that cannot hold a
   * foreign value (the MemoryStore).
   */
  poison?: (slot: string, kind: PoisonKind) => Promise<void>;
  /** Frees what setup made: connections, keys, tables. */
  teardown?: () => Promise<void>;
}

/**
 * Runs one case of the suite: by default in line, stopping at the first
 * failure; {@linkcode storeConformance} passes `t.step`.
 *
 * @example Log each case as it runs
 * ```ts
 * import type { ConformanceStep } from "@idempotent/http/testing";
 * import assert from "node:assert/strict";
 *
 * const names: string[] = [];
 * const step: ConformanceStep = async (name, fn) => {
 *   names.push(name);
 *   await fn();
 * };
 * await step("a case", () => Promise.resolve());
 * assert.deepEqual(names, ["a case"]);
 * ```
 */
export type ConformanceStep = (
  name: string,
  fn: () => Promise<void>,
) => Promise<unknown>;

/**
 * How {@linkcode checkStoreConformance} runs the suite against one store.
 *
 * @example Run one case alone
 * ```ts
 * import { checkStoreConformance } from "@idempotent/http/testing";
 * import type { ConformanceCheck } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const ran: string[] = [];
 * const check: ConformanceCheck = {
 *   leaseMs: 500,
 *   only: ["omitted bodies keep their reason"],
 *   setup: () =>
 *     Promise.resolve({ store: new MemoryStore(), elapse: () => Promise.resolve() }),
 *   step: (name, fn) => {
 *     ran.push(name);
 *     return fn();
 *   },
 * };
 * await checkStoreConformance(check);
 * assert.deepEqual(ran, ["omitted bodies keep their reason"]);
 * const typo = { ...check, only: ["omitted bodies keep their reasons"] };
 * await assert.rejects(checkStoreConformance(typo), TypeError);
 * ```
 */
export interface ConformanceCheck {
  /**
   * The lease, in milliseconds, of the cases that wait for expiry: long
   * enough that a store operation finishes well within it.
   *
   * @default {200}
   */
  leaseMs?: number;
  /**
   * The names of the cases to run, as their steps are named; a name that is
   * no case's is a `TypeError`.
   *
   * @default {every case}
   */
  only?: readonly string[];
  /** Makes the store, once for the suite. */
  setup(): Promise<ConformanceHarness>;
  /**
   * Runs each case.
   *
   * @default {in line, rejecting at the first failure with the case's name}
   */
  step?: ConformanceStep;
}

/**
 * How {@linkcode storeConformance} registers the suite for one store: as
 * {@linkcode ConformanceCheck}, each case a `t.step`.
 *
 * @example Options for a store whose service may be down
 * ```ts
 * import type { ConformanceOptions } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const options: ConformanceOptions = {
 *   name: "MyStore",
 *   ignore: "the service is unreachable",
 *   setup: () =>
 *     Promise.resolve({ store: new MemoryStore(), elapse: () => Promise.resolve() }),
 * };
 * assert.equal(options.ignore, "the service is unreachable");
 * ```
 */
export interface ConformanceOptions extends Omit<ConformanceCheck, "step"> {
  /** The store's name in test names, such as `"RedisStore (ioredis)"`. */
  name: string;
  /**
   * `false`, or the reason the suite is ignored (shown in the test name).
   *
   * @default {false}
   */
  ignore?: false | string;
}

/**
 * What a case needs beyond the four operations and `elapse`: the harness's
 * `advanceClock` or `poison`, or the store's `waitForChange`.
 */
export type Need = "advanceClock" | "poison" | "waitForChange";

/** Whether the harness (or its store) has what each need names. */
export const HAS: Record<Need, (h: ConformanceHarness) => boolean> = {
  advanceClock: (h) => Boolean(h.advanceClock),
  poison: (h) => Boolean(h.poison),
  waitForChange: (h) => Boolean(h.store.waitForChange),
};

/** One case of the suite. */
export interface ConformanceCase {
  /** What the store must do: the case's step name, and what `only` selects. */
  name: string;
  /** What the case uses beyond the four operations: unmet, it is skipped. */
  needs: readonly Need[];
  /** Runs the case's assertions against the context's store. */
  run(c: CaseContext): Promise<void>;
}

/**
 * What every case runs with, made once per store from its harness: slots
 * unique to this run, so that no case depends on another's leftovers. Its
 * members are fields, so that a case can take the ones it uses apart.
 */
export class CaseContext {
  /** The store under test. */
  readonly store: IdempotencyStore;
  /** What every slot of this run begins with. */
  readonly prefix: string = `conf:${crypto.randomUUID().slice(0, 8)}:`;
  #slots = 0;

  /**
   * @param h What the store's setup handed the suite.
   * @param lease The lease of the cases that wait for expiry, in milliseconds.
   */
  constructor(readonly h: ConformanceHarness, readonly lease: number) {
    this.store = h.store;
  }

  /** A slot no case has used yet. */
  readonly slot = (): string => `${this.prefix}${++this.#slots}`;

  /** Claim options: the suite's lease and TTL, unless `more` says otherwise. */
  readonly opts = (
    fingerprint: string,
    more: Partial<ClaimOptions> = {},
  ): ClaimOptions => ({
    fingerprint,
    leaseMs: this.lease,
    ttlMs: 60_000,
    ...more,
  });

  /** {@linkcode ConformanceHarness.elapse}. */
  readonly elapse = (ms: number): Promise<void> => this.h.elapse(ms);

  /** {@linkcode ConformanceHarness.advanceClock} (need `advanceClock`). */
  readonly advance = (ms: number): Promise<void> =>
    needed(this.h.advanceClock, "advanceClock")(ms);

  /** {@linkcode ConformanceHarness.poison} (need `poison`). */
  readonly poison = (slot: string, kind: PoisonKind): Promise<void> =>
    needed(this.h.poison, "poison")(slot, kind);

  /** The store's `waitForChange` (need `waitForChange`). */
  readonly watch = (slot: string, signal: AbortSignal): Promise<void> =>
    needed(this.store.waitForChange, "waitForChange").call(
      this.store,
      slot,
      signal,
    );

  /**
   * `count` claims on `s` at once, the i-th with fingerprint `${tag}-${i}`:
   * their results, and the indexes of those acquired.
   */
  readonly claimAll = async (
    s: string,
    count: number,
    tag: string,
  ): Promise<{ results: ClaimResult[]; winners: number[] }> => {
    const results = await Promise.all(
      Array.from(
        { length: count },
        (_, i) => this.store.claim(s, this.opts(`${tag}-${i}`)),
      ),
    );
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

const encoder = new TextEncoder();

/** `text` as UTF-8. */
export function bytes(text: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(text);
}

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

/** A 200 with no headers and `text` as its body. */
export function plain(text: string): StoredResponse {
  return { status: 200, headers: [], body: bytes(text) };
}

/** The token of an acquired claim; fails on any other result. */
export function acquired(result: ClaimResult): string {
  assert.equal(
    result.state,
    "acquired",
    `expected acquired, got ${JSON.stringify(result)}`,
  );
  return (result as { token: string }).token;
}

/** The response of a completed claim; fails on any other result. */
export function completedResponse(result: ClaimResult): StoredResponse {
  assert.equal(
    result.state,
    "completed",
    `expected completed, got ${result.state}`,
  );
  return (result as { response: StoredResponse }).response;
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
    assert.ok(sameBytes(actual.body, expected.body), "body bytes differ");
    assert.equal(actual.omitted, undefined);
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Waits for `promise`, failing instead of hanging when it has not resolved
 * after 10 s (a bound, not a timing: the awaited change has happened).
 */
export async function resolves(
  promise: Promise<void>,
  what: string,
): Promise<void> {
  const stop = new AbortController();
  try {
    const first = await Promise.race([
      promise.then(() => "resolved" as const),
      delay(10_000, stop.signal),
    ]);
    if (first === "elapsed") throw new Error(`${what} did not resolve`);
  } finally {
    stop.abort();
  }
}
