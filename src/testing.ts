// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The store contract of the `IdempotencyStore` interface as one suite, the
 * same cases this package runs against each of its own stores: one winner
 * among concurrent claims, fencing of stale owners, lease takeover, exact
 * lease and TTL boundaries, expiry that never blocks, the first claim's TTL
 * kept on completion, binary bodies up to 1 MiB, omitted bodies, many
 * `Set-Cookie` headers, and unreadable values read as in flight.
 *
 * {@linkcode storeConformance} registers Deno tests (one `Deno.test` per
 * store, one step per case): call it at the top level of a `*_test.ts` file
 * and run `deno test`. {@linkcode checkStoreConformance} runs the same cases
 * without registering anything, for another test runner or a script. Every
 * case uses slots of its own, so no case depends on another's leftovers.
 *
 * @example Prove a store against the contract
 * ```ts
 * import { checkStoreConformance } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 *
 * let now = 0;
 * await checkStoreConformance({
 *   setup: () =>
 *     Promise.resolve({
 *       store: new MemoryStore({ clock: () => now }),
 *       elapse: (ms) => Promise.resolve(void (now += ms)),
 *       advanceClock: (ms) => Promise.resolve(void (now += ms)),
 *     }),
 * }); // rejects, naming the case, if the store breaks the contract
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
} from "./store.ts";

export * from "./stores/_contract.ts";

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
 * @example Run the cases with a longer lease
 * ```ts
 * import type { ConformanceCheck } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const check: ConformanceCheck = {
 *   leaseMs: 500,
 *   setup: () =>
 *     Promise.resolve({
 *       store: new MemoryStore(),
 *       elapse: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
 *     }),
 * };
 * assert.equal(check.leaseMs, 500);
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
 * How {@linkcode storeConformance} registers the suite for one store.
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
export interface ConformanceOptions {
  /** The store's name in test names, such as `"RedisStore (ioredis)"`. */
  name: string;
  /**
   * `false`, or the reason the suite is ignored (shown in the test name).
   *
   * @default {false}
   */
  ignore?: false | string;
  /**
   * The lease, in milliseconds, of the cases that wait for expiry: long
   * enough that a store operation finishes well within it.
   *
   * @default {200}
   */
  leaseMs?: number;
  /** Makes the store, once for the suite. */
  setup(): Promise<ConformanceHarness>;
}

const encoder = new TextEncoder();

function bytes(text: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(text);
}

/** Deterministic bytes covering every octet value. */
function pattern(length: number, seed = 7): Uint8Array<ArrayBuffer> {
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
function plain(text: string): StoredResponse {
  return { status: 200, headers: [], body: bytes(text) };
}

function acquired(result: ClaimResult): string {
  assert.equal(
    result.state,
    "acquired",
    `expected acquired, got ${JSON.stringify(result)}`,
  );
  return (result as { token: string }).token;
}

function completedResponse(result: ClaimResult): StoredResponse {
  assert.equal(
    result.state,
    "completed",
    `expected completed, got ${result.state}`,
  );
  return (result as { response: StoredResponse }).response;
}

function assertSameResponse(actual: StoredResponse, expected: StoredResponse) {
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
 * Registers the conformance suite for one store as a Deno test, one step per
 * case. Call it at the top level of a test file (Deno registers tests only
 * there, so this example is not run by `deno test --doc`;
 * {@linkcode checkStoreConformance}'s runs the same cases).
 *
 * @param options The store's name, setup and timing.
 *
 * @example Register the suite in my_store_test.ts
 * ```ts ignore
 * import { storeConformance } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 *
 * storeConformance({
 *   name: "MemoryStore",
 *   setup: () =>
 *     Promise.resolve({
 *       store: new MemoryStore(),
 *       elapse: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
 *     }),
 * });
 * ```
 */
export function storeConformance(options: ConformanceOptions): void {
  const ignore = options.ignore ?? false;
  Deno.test({
    name: ignore
      ? `${options.name} conforms to the store contract (ignored: ${ignore})`
      : `${options.name} conforms to the store contract`,
    ignore: ignore !== false,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: (t) =>
      checkStoreConformance({
        ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
        setup: options.setup,
        step: (name, fn) => t.step(name, fn),
      }),
  });
}

/**
 * Runs the conformance suite against one store without registering a test:
 * sets the store up, runs every case, and tears it down.
 *
 * @param options The store's setup, timing and how each case runs.
 * @returns A promise that settles when every case has run.
 * @throws {Error} With the failing case's name, and its assertion as `cause`,
 * when a case fails under the default `step`.
 *
 * @example A store that lets a stale owner release fails
 * ```ts
 * import { checkStoreConformance } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let now = 0;
 * const broken = new MemoryStore({ clock: () => now });
 * broken.release = () => Promise.resolve("applied"); // never checks the token
 * await assert.rejects(
 *   checkStoreConformance({
 *     setup: () =>
 *       Promise.resolve({
 *         store: broken,
 *         elapse: (ms) => Promise.resolve(void (now += ms)),
 *       }),
 *   }),
 *   /Store conformance case failed/,
 * );
 * ```
 */
export function checkStoreConformance(
  options: ConformanceCheck,
): Promise<void> {
  const lease = options.leaseMs ?? 200;
  const ttl = 60_000;
  const suite = {
    async fn(t: { step: ConformanceStep }): Promise<void> {
      const h = await options.setup();
      const { store } = h;
      const run = crypto.randomUUID().slice(0, 8);
      let n = 0;
      const slot = () => `conf:${run}:${++n}`;
      const opts = (fingerprint: string, more: Partial<ClaimOptions> = {}) => ({
        fingerprint,
        leaseMs: lease,
        ttlMs: ttl,
        ...more,
      });
      /** The slot's next claim replays `response`. */
      const assertReplays = async (
        s: string,
        fingerprint: string,
        response: StoredResponse,
      ) =>
        assertSameResponse(
          completedResponse(await store.claim(s, opts(fingerprint))),
          response,
        );
      /**
       * `count` claims on `s` at once, the i-th with fingerprint
       * `${prefix}-${i}`: their results, and the indexes of those acquired.
       */
      const claimAll = async (s: string, count: number, prefix: string) => {
        const results = await Promise.all(
          Array.from(
            { length: count },
            (_, i) => store.claim(s, opts(`${prefix}-${i}`)),
          ),
        );
        const winners = results.flatMap((r, i) =>
          r.state === "acquired" ? [i] : []
        );
        return { results, winners };
      };
      /** Extending, releasing and completing with `token` are all lost. */
      const assertWritesLost = async (
        s: string,
        token: string,
        response: StoredResponse,
      ) => {
        assert.equal(await store.extend(s, token, lease), "lost");
        assert.equal(await store.release(s, token), "lost");
        assert.equal(await store.complete(s, token, response), "lost");
      };
      try {
        await t.step(
          "many concurrent claims on one slot have exactly one winner",
          async () => {
            const s = slot();
            const { results, winners } = await claimAll(s, 50, "fp");
            assert.equal(winners.length, 1, `winners: ${winners.length}`);
            const winner = winners[0]!;
            for (const [i, r] of results.entries()) {
              if (i === winner) continue;
              assert.equal(r.state, "in_flight");
              if (r.state === "in_flight") {
                assert.equal(r.fingerprint, `fp-${winner}`);
                assert.ok(
                  r.retryAfterMs >= 1 && r.retryAfterMs <= lease,
                  `retryAfterMs ${r.retryAfterMs}`,
                );
              }
            }
          },
        );

        await t.step(
          "a fresh claim is acquired with a unique token and recovered: false",
          async () => {
            const a = await store.claim(slot(), opts("a"));
            const b = await store.claim(slot(), opts("b"));
            assert.equal(a.state, "acquired");
            assert.equal(b.state, "acquired");
            if (a.state === "acquired" && b.state === "acquired") {
              assert.equal(a.recovered, false);
              assert.equal(typeof a.token, "string");
              assert.ok(a.token.length > 0);
              assert.notEqual(a.token, b.token);
            }
          },
        );

        await t.step(
          "complete then claim returns the response with headers in order and every Set-Cookie",
          async () => {
            const s = slot();
            const token = acquired(await store.claim(s, opts("fp-1")));
            const response: StoredResponse = {
              status: 201,
              headers: [
                ["content-type", "application/json"],
                ["set-cookie", "a=1; Path=/; HttpOnly"],
                ["x-trace", "one, two"],
                ["set-cookie", "b=2; Expires=Wed, 21 Oct 2015 07:28:00 GMT"],
                ...Array.from(
                  { length: 40 },
                  (_, i) => ["set-cookie", `c${i}=${i}`] as [string, string],
                ),
                ["location", "/payments/1"],
              ],
              body: bytes('{"id":1,"note":"héllo"}'),
            };
            assert.equal(await store.complete(s, token, response), "applied");
            const again = await store.claim(s, opts("fp-other"));
            assert.equal(again.state, "completed");
            if (again.state === "completed") {
              assert.equal(again.fingerprint, "fp-1");
            }
            assertSameResponse(completedResponse(again), response);
          },
        );

        await t.step(
          "binary bodies of 0 bytes, 1 byte, 64 KiB and 1 MiB round-trip exactly",
          async () => {
            for (const length of [0, 1, 65_536, 65_537, 1_048_576]) {
              const s = slot();
              const token = acquired(await store.claim(s, opts("bin")));
              const response: StoredResponse = {
                status: 200,
                headers: [["content-type", "application/octet-stream"]],
                body: pattern(length, length + 1),
              };
              assert.equal(await store.complete(s, token, response), "applied");
              await assertReplays(s, "bin", response);
            }
          },
        );

        await t.step("omitted bodies keep their reason", async () => {
          for (
            const reason of ["too_large", "stream_error", "cancelled"] as const
          ) {
            const s = slot();
            const token = acquired(await store.claim(s, opts("om")));
            const response: StoredResponse = {
              status: 200,
              headers: [["content-type", "text/plain"]],
              body: null,
              omitted: reason,
            };
            assert.equal(await store.complete(s, token, response), "applied");
            await assertReplays(s, "om", response);
          }
        });

        await t.step(
          "a live claim reads as in flight with the owner's fingerprint",
          async () => {
            const s = slot();
            acquired(await store.claim(s, opts("owner")));
            const other = await store.claim(s, opts("other"));
            assert.equal(other.state, "in_flight");
            if (other.state === "in_flight") {
              assert.equal(other.fingerprint, "owner");
              assert.ok(other.retryAfterMs >= 1 && other.retryAfterMs <= lease);
            }
          },
        );

        await t.step(
          "many concurrent claims on an expired lease have at most one winner, which recovers it",
          async () => {
            // At most: a store of two stores (FailoverStore) may see each
            // pick another winner and answer every claim in flight; never
            // two winners.
            const s = slot();
            acquired(await store.claim(s, opts("first")));
            await h.elapse(lease + 100);
            const { results, winners } = await claimAll(s, 20, "late");
            assert.ok(winners.length <= 1, `winners: ${winners.length}`);
            for (const [i, r] of results.entries()) {
              if (i === winners[0]) {
                assert.equal(r.state === "acquired" && r.recovered, true);
                continue;
              }
              assert.equal(r.state, "in_flight");
              if (r.state === "in_flight" && winners.length === 1) {
                assert.equal(r.fingerprint, `late-${winners[0]}`);
              }
            }
          },
        );

        await t.step(
          "an expired lease is taken over; the stale owner's writes are lost and change nothing",
          async () => {
            const s = slot();
            const stale = acquired(await store.claim(s, opts("first")));
            await h.elapse(lease + 100);
            const takeover = await store.claim(s, opts("second"));
            assert.equal(takeover.state, "acquired");
            if (takeover.state !== "acquired") return;
            assert.equal(takeover.recovered, true);
            assert.notEqual(takeover.token, stale);
            assert.equal(await store.extend(s, stale, lease), "lost");
            assert.equal(
              await store.complete(s, stale, plain("stale")),
              "lost",
            );
            assert.equal(await store.release(s, stale), "lost");
            const seen = await store.claim(s, opts("third"));
            assert.equal(
              seen.state,
              "in_flight",
              "the new owner still holds the slot",
            );
            if (seen.state === "in_flight") {
              assert.equal(seen.fingerprint, "second");
            }
            const fresh: StoredResponse = {
              status: 202,
              headers: [["x-owner", "second"]],
              body: bytes("fresh"),
            };
            assert.equal(
              await store.complete(s, takeover.token, fresh),
              "applied",
            );
            const done = await store.claim(s, opts("fourth"));
            if (done.state === "completed") {
              assert.equal(done.fingerprint, "second");
            }
            assertSameResponse(completedResponse(done), fresh);
          },
        );

        await t.step(
          "extend keeps a live owner past its first lease",
          async () => {
            const s = slot();
            const token = acquired(await store.claim(s, opts("ext")));
            await h.elapse(lease * 0.5);
            assert.equal(await store.extend(s, token, lease * 3), "applied");
            await h.elapse(lease * 1.2);
            const other = await store.claim(s, opts("ext"));
            assert.equal(
              other.state,
              "in_flight",
              "the extended lease still holds",
            );
            assert.equal(
              await store.complete(s, token, plain("ok")),
              "applied",
            );
          },
        );

        await t.step(
          "an owner whose lease ran out but was not taken over still owns the slot",
          async () => {
            const s = slot();
            const token = acquired(await store.claim(s, opts("late")));
            await h.elapse(lease + 100);
            assert.equal(await store.extend(s, token, lease * 3), "applied");
            assert.equal(
              (await store.claim(s, opts("late"))).state,
              "in_flight",
            );
            const late: StoredResponse = plain("late");
            assert.equal(await store.complete(s, token, late), "applied");
            await assertReplays(s, "late", late);
          },
        );

        await t.step(
          "release frees the slot and a released token cannot write",
          async () => {
            const s = slot();
            const token = acquired(await store.claim(s, opts("rel")));
            assert.equal(await store.release(s, token), "applied");
            assert.equal(await store.release(s, token), "lost");
            assert.equal(await store.extend(s, token, lease), "lost");
            assert.equal(
              await store.complete(s, token, plain("x")),
              "lost",
            );
            const next = await store.claim(s, opts("rel-2"));
            assert.equal(next.state, "acquired");
            if (next.state === "acquired") assert.equal(next.recovered, false);
          },
        );

        await t.step(
          "a completed record cannot be released, extended or completed again",
          async () => {
            const s = slot();
            const token = acquired(await store.claim(s, opts("done")));
            const first: StoredResponse = plain("first");
            assert.equal(await store.complete(s, token, first), "applied");
            assert.equal(await store.release(s, token), "lost");
            assert.equal(await store.extend(s, token, lease), "lost");
            assert.equal(
              await store.complete(s, token, plain("second")),
              "lost",
            );
            await assertReplays(s, "done", first);
          },
        );

        await t.step(
          "writes with a foreign token or on an absent slot are lost",
          async () => {
            const s = slot();
            const token = acquired(await store.claim(s, opts("own")));
            const wrong = `${token}x`;
            await assertWritesLost(s, wrong, plain("x"));
            assert.equal(
              (await store.claim(s, opts("own"))).state,
              "in_flight",
            );
            const absent = slot();
            await assertWritesLost(absent, token, {
              status: 200,
              headers: [],
              body: null,
              omitted: "too_large",
            });
            assert.equal(
              (await store.claim(absent, opts("own"))).state,
              "acquired",
            );
          },
        );

        await t.step(
          "the TTL window is the first claim's: completing does not restart it",
          async () => {
            const s = slot();
            const window = lease * 4;
            const token = acquired(
              await store.claim(s, opts("ttl", { ttlMs: window })),
            );
            await h.elapse(window * 0.6);
            assert.equal(
              await store.complete(s, token, plain("t")),
              "applied",
            );
            assert.equal(
              (await store.claim(s, opts("ttl", { ttlMs: window }))).state,
              "completed",
            );
            await h.elapse(window * 0.6);
            const after = await store.claim(s, opts("ttl", { ttlMs: window }));
            assert.equal(
              after.state,
              "acquired",
              "the record expired with the first claim's window",
            );
          },
        );

        await t.step(
          "expired records never block, completed or in flight",
          async () => {
            const window = lease * 2;
            const done = slot();
            const token = acquired(
              await store.claim(done, opts("exp", { ttlMs: window })),
            );
            assert.equal(
              await store.complete(done, token, plain("e")),
              "applied",
            );
            const open = slot();
            acquired(
              await store.claim(
                open,
                opts("exp", { ttlMs: window, leaseMs: window * 10 }),
              ),
            );
            await h.elapse(window + 100);
            const a = await store.claim(done, opts("exp-2"));
            assert.equal(a.state, "acquired");
            if (a.state === "acquired") assert.equal(a.recovered, false);
            assert.equal(
              (await store.claim(open, opts("exp-2"))).state,
              "acquired",
            );
            assert.equal(
              await store.complete(done, token, plain("old")),
              "lost",
              "the expired record's owner lost it",
            );
          },
        );

        await t.step(
          "slots are independent and may be up to 256 bytes",
          async () => {
            const long = `conf:${run}:` +
              "x".repeat(256 - `conf:${run}:`.length);
            assert.equal(new TextEncoder().encode(long).byteLength, 256);
            acquired(await store.claim(long, opts("long")));
            const sibling = `${long.slice(0, -1)}y`;
            acquired(await store.claim(sibling, opts("long")));
            await assert.rejects(
              () => store.claim(`${long}z`, opts("long")),
              TypeError,
            );
            await assert.rejects(
              () => store.claim("", opts("long")),
              TypeError,
            );
          },
        );

        await t.step(
          "a lease or TTL is a positive number of ms (a fraction rounds up); anything else is a RangeError",
          async () => {
            const s = slot();
            const token = acquired(
              await store.claim(
                s,
                opts("dur", { leaseMs: 1.5, ttlMs: 60_000.5 }),
              ),
            );
            assert.equal(await store.extend(s, token, lease + 0.5), "applied");
            for (
              const bad of [0, -1, -0.5, NaN, Infinity, 2 ** 53, "100", null]
            ) {
              const value = bad as number;
              await assert.rejects(
                () => store.claim(slot(), opts("dur", { leaseMs: value })),
                RangeError,
                `leaseMs ${bad}`,
              );
              await assert.rejects(
                () => store.claim(slot(), opts("dur", { ttlMs: value })),
                RangeError,
                `ttlMs ${bad}`,
              );
              await assert.rejects(
                () => store.extend(s, token, value),
                RangeError,
                `extend ${bad}`,
              );
            }
            await assert.rejects(
              () =>
                store.claim(slot(), {
                  ...opts("dur"),
                  fingerprint: 1 as unknown as string,
                }),
              TypeError,
            );
            assert.equal(
              await store.complete(s, token, plain("d")),
              "applied",
            );
          },
        );

        if (h.advanceClock) {
          const advance = h.advanceClock;
          await t.step(
            "a claim whose lease ends exactly now no longer blocks (rule 5)",
            async () => {
              const s = slot();
              const first = acquired(
                await store.claim(s, opts("edge", { leaseMs: 1_000 })),
              );
              await advance(999);
              const before = await store.claim(s, opts("edge"));
              assert.equal(before.state, "in_flight", "1 ms of lease is left");
              if (before.state === "in_flight") {
                assert.equal(before.retryAfterMs, 1);
              }
              await advance(1);
              const after = await store.claim(s, opts("edge"));
              assert.equal(
                after.state,
                "acquired",
                `the lease ended exactly now: ${JSON.stringify(after)}`,
              );
              if (after.state !== "acquired") return;
              assert.equal(after.recovered, true);
              assert.equal(await store.extend(s, first, lease), "lost");
            },
          );

          await t.step(
            "a record whose TTL ends exactly now is absent (rule 5)",
            async () => {
              const s = slot();
              const token = acquired(
                await store.claim(s, opts("ttl-edge", { ttlMs: 1_000 })),
              );
              assert.equal(
                await store.complete(s, token, plain("edge")),
                "applied",
              );
              await advance(999);
              assert.equal(
                (await store.claim(s, opts("ttl-edge"))).state,
                "completed",
                "1 ms of TTL is left",
              );
              await advance(1);
              const after = await store.claim(s, opts("ttl-edge"));
              assert.equal(
                after.state,
                "acquired",
                `the TTL ended exactly now: ${JSON.stringify(after)}`,
              );
              if (after.state === "acquired") {
                assert.equal(after.recovered, false);
              }
            },
          );
        }

        if (store.waitForChange) {
          const watch = store.waitForChange.bind(store);
          await t.step(
            "waitForChange() resolves at a completion or a release, at once for a settled slot, and when its signal aborts",
            async () => {
              const never = new AbortController().signal;
              for (const settle of ["complete", "release"] as const) {
                const s = slot();
                const token = acquired(await store.claim(s, opts("w")));
                const changed = watch(s, never);
                if (settle === "complete") {
                  await store.complete(s, token, {
                    status: 201,
                    headers: [],
                    body: bytes("done"),
                  });
                } else {
                  await store.release(s, token);
                }
                await resolves(changed, `waitForChange() after ${settle}`);
                // Settled or free: no wait.
                await resolves(
                  watch(s, never),
                  `waitForChange() after ${settle}, again`,
                );
              }
              const s = slot();
              acquired(await store.claim(s, opts("w")));
              const stop = new AbortController();
              const watching = watch(s, stop.signal);
              stop.abort();
              await resolves(watching, "waitForChange() after its abort");
            },
          );
        }

        if (h.poison) {
          const poison = h.poison;
          await t.step(
            "an unreadable record reads as in flight, never throws, and is never taken over",
            async () => {
              for (
                const kind of [
                  "garbage",
                  "truncated",
                  "future_version",
                ] as const
              ) {
                const s = slot();
                await poison(s, kind);
                for (let i = 0; i < 2; i++) {
                  const seen = await store.claim(s, opts("p"));
                  assert.equal(
                    seen.state,
                    "in_flight",
                    `${kind}: ${JSON.stringify(seen)}`,
                  );
                  if (seen.state === "in_flight") {
                    assert.equal(seen.fingerprint, null);
                    assert.ok(seen.retryAfterMs >= 1);
                  }
                }
                await h.elapse(lease + 50);
                assert.equal(
                  (await store.claim(s, opts("p"))).state,
                  "in_flight",
                  `${kind} after a lease`,
                );
                await assertWritesLost(s, "token", plain("x"));
              }
            },
          );
        }
      } finally {
        await h.teardown?.();
      }
    },
  };
  return suite.fn({ step: options.step ?? inLine });
}

/**
 * Waits for `promise`, failing instead of hanging when it has not resolved
 * after 10 s (a bound, not a timing: the awaited change has happened).
 */
async function resolves(promise: Promise<void>, what: string): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not resolve`)),
      10_000,
    );
  });
  try {
    await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs a case in line; a failure rejects with the case's name. */
async function inLine(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (error) {
    throw new Error(`Store conformance case failed: ${name}`, {
      cause: error,
    });
  }
}
