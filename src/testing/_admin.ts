// Copyright 2026 the @idempotent/http authors. MIT license.
/** The cases on `peek`, `forget` and `stats` (docs/architecture.md, Inspect and forget). @module */

import assert from "node:assert/strict";
import { SYSTEM_CLOCK } from "../_async.ts";
import { acquired, type ConformanceCase, pattern, plain } from "./_context.ts";
import type { PeekResult, StoredResponse, StoreStats } from "../store.ts";

/** A completed peek's result; fails on any other. */
function expectCompleted(
  found: PeekResult,
): Extract<PeekResult, { state: "completed" }> {
  assert.equal(found.state, "completed", JSON.stringify(found));
  return found as Extract<PeekResult, { state: "completed" }>;
}

/** An in-flight peek's result; fails on any other. */
function expectInFlight(
  found: PeekResult,
): Extract<PeekResult, { state: "in_flight" }> {
  assert.equal(found.state, "in_flight", JSON.stringify(found));
  return found as Extract<PeekResult, { state: "in_flight" }>;
}

/** `a` and `b` within 2 ms: two reads of one server's clock, rounded to ms. */
function near(a: number, b: number, what: string): void {
  assert.ok(Math.abs(a - b) <= 2, `${what}: ${a} and ${b}`);
}

const TTL = 60_000;

/** The cases on inspecting and forgetting, in the order they run. */
export const ADMIN_CASES: readonly ConformanceCase[] = [
  {
    name: "peek() of a slot never claimed, or forgotten twice, is absent",
    needs: ["peek", "forget"],
    async run({ slot, peek, forget }) {
      const s = slot();
      assert.deepEqual(await peek(s), { state: "absent" });
      assert.equal(await forget(s), "absent");
      assert.deepEqual(await peek(s), { state: "absent" });
    },
  },
  {
    name:
      "peek() of a claim is in flight: its fingerprint, lease and TTL on the store's clock",
    needs: ["peek"],
    async run({ peek, claimed }) {
      const [s] = await claimed("fp-peek", { leaseMs: 10_000, ttlMs: TTL });
      const found = expectInFlight(await peek(s));
      assert.equal(found.fingerprint, "fp-peek");
      near(found.expiresAt - found.leaseExpiresAt, TTL - 10_000, "TTL - lease");
      if (found.claimedAt !== null) {
        near(found.leaseExpiresAt - found.claimedAt, 10_000, "the lease");
      }
    },
  },
  {
    name:
      "peek() of a completed record: status, header names in order, body bytes or why omitted",
    needs: ["peek"],
    async run({ store, peek, claimed }) {
      const response: StoredResponse = {
        status: 201,
        headers: [
          ["content-type", "text/plain"],
          ["set-cookie", "a=1"],
          ["set-cookie", "b=2"],
        ],
        body: pattern(100_000),
      };
      const omitted: StoredResponse = {
        status: 502,
        headers: [["x-b", "1"], ["x-a", "2"]],
        body: null,
        omitted: "too_slow",
      };
      for (const [i, r] of [response, omitted, plain("")].entries()) {
        const [s, token] = await claimed(`fp-done-${i}`, { ttlMs: TTL });
        const before = expectInFlight(await peek(s));
        assert.equal(await store.complete(s, token, r), "applied");
        const found = expectCompleted(await peek(s));
        assert.equal(found.fingerprint, `fp-done-${i}`);
        assert.equal(found.status, r.status);
        assert.deepEqual(found.headerNames, r.headers.map(([name]) => name));
        assert.equal(found.bodyBytes, r.body?.byteLength ?? null);
        assert.equal(found.omitted, r.omitted);
        near(found.expiresAt, before.expiresAt, "the record's TTL");
        assert.equal(found.claimedAt, before.claimedAt);
      }
    },
  },
  {
    name: "peek() of an unreadable value reports it and leaves it as it was",
    needs: ["peek", "poison"],
    async run({ store, slot, opts, peek, poison }) {
      for (const kind of ["garbage", "truncated", "future_version"] as const) {
        const s = slot();
        await poison(s, kind);
        assert.equal((await peek(s)).state, "unreadable", kind);
        assert.equal((await peek(s)).state, "unreadable", `${kind} again`);
        const claim = await store.claim(s, opts("p"));
        assert.equal(claim.state, "in_flight", kind);
        if (claim.state === "in_flight") assert.equal(claim.fingerprint, null);
      }
    },
  },
  {
    name: "peek() of an expired record is absent",
    needs: ["peek"],
    async run({ store, lease, peek, claimed, elapse }) {
      const [s, token] = await claimed("fp-exp", {
        leaseMs: lease,
        ttlMs: lease,
      });
      const [t] = await claimed("fp-exp", { leaseMs: lease, ttlMs: lease });
      assert.equal(await store.complete(s, token, plain("x")), "applied");
      await elapse(lease + 50);
      assert.deepEqual(await peek(s), { state: "absent" });
      assert.deepEqual(await peek(t), { state: "absent" });
    },
  },
  {
    name:
      "peek() changes nothing: it never extends a lease, and a claim recovers after it",
    needs: ["peek"],
    async run({ store, lease, opts, peek, claimed, elapse }) {
      const [s, token] = await claimed("fp-look");
      const first = expectInFlight(await peek(s));
      await elapse(lease / 2);
      const second = expectInFlight(await peek(s));
      near(second.leaseExpiresAt, first.leaseExpiresAt, "the lease's end");
      near(second.expiresAt, first.expiresAt, "the record's end");
      await elapse(lease / 2 + 50);
      const lapsed = expectInFlight(await peek(s));
      near(lapsed.leaseExpiresAt, first.leaseExpiresAt, "the lapsed lease");
      const again = await store.claim(s, opts("fp-look"));
      assert.equal(again.state, "acquired", JSON.stringify(again));
      if (again.state === "acquired") assert.equal(again.recovered, true);
      assert.equal(await store.complete(s, token, plain("late")), "lost");
    },
  },
  {
    name:
      "forget() of a claim deletes it: the next claim acquires, the old token's writes are lost",
    needs: ["forget"],
    async run({ store, opts, forget, claimed, assertWritesLost }) {
      const [s, token] = await claimed("fp-f", { leaseMs: 10_000 });
      assert.equal(await forget(s), "deleted");
      const next = await store.claim(s, opts("fp-g", { leaseMs: 10_000 }));
      const fresh = acquired(next);
      if (next.state === "acquired") assert.equal(next.recovered, false);
      await assertWritesLost(s, token, plain("old"));
      assert.equal(await store.complete(s, fresh, plain("new")), "applied");
    },
  },
  {
    name:
      "forget() of a completed record or an unreadable value deletes it, and a claim acquires",
    needs: ["forget"],
    async run({ h, store, opts, slot, forget, claimed }) {
      const [s, token] = await claimed("fp-c");
      assert.equal(await store.complete(s, token, plain("done")), "applied");
      assert.equal(await forget(s), "deleted");
      if (store.peek) {
        assert.deepEqual(await store.peek(s), { state: "absent" });
      }
      acquired(await store.claim(s, opts("fp-c")));
      if (h.poison === undefined) return;
      const p = slot();
      await h.poison(p, "garbage");
      assert.equal(await forget(p), "deleted");
      acquired(await store.claim(p, opts("fp-p")));
    },
  },
  {
    name:
      "stats() counts no record past its TTL, deleted yet or not, and forget() of one is absent",
    needs: ["stats", "forget"],
    async run({ store, lease, opts, stats, forget, claimed, elapse }) {
      // Expired is absent, deleted or not (PostgreSQL before sweep(), KV,
      // MemoryStore); another case's record expiring retakes the counts. The
      // records outlive three counts, a scan of a shared server being slow.
      const since = SYSTEM_CLOCK.now();
      await stats();
      const ttlMs = Math.max(lease, 3 * (SYSTEM_CLOCK.now() - since));
      const short = { leaseMs: ttlMs, ttlMs };
      let seen: [StoreStats, StoreStats] | undefined;
      let slots: string[] = [];
      for (let attempt = 0; attempt < 3; attempt++) {
        const [a] = await claimed("fp-x1", short);
        const [b, token] = await claimed("fp-x2", short);
        assert.equal(await store.complete(b, token, plain("x")), "applied");
        slots = [a, b];
        const live = await stats();
        await elapse(ttlMs + 50);
        const after = await stats();
        seen = [live, after];
        if (
          live.inFlight - after.inFlight === 1 &&
          live.completed - after.completed === 1
        ) break;
      }
      const [live, after] = seen!;
      assert.equal(live.inFlight - after.inFlight, 1, JSON.stringify(seen));
      assert.equal(live.completed - after.completed, 1, JSON.stringify(seen));
      assert.equal(after.unreadable, live.unreadable, JSON.stringify(seen));
      for (const s of slots) {
        assert.equal(await forget(s), "absent", "an expired record");
        assert.equal(await forget(s), "absent", "and again");
        acquired(await store.claim(s, opts("fp-x3")));
      }
    },
  },
  {
    name: "stats() counts records in flight and completed",
    needs: ["stats"],
    async run({ store, stats, claimed }) {
      // A record of an earlier case may expire between the two counts: then
      // the difference is off, and the count is taken again.
      let seen: [StoreStats, StoreStats] | undefined;
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = await stats();
        await claimed("fp-s1");
        const [s, token] = await claimed("fp-s2");
        assert.equal(await store.complete(s, token, plain("s")), "applied");
        const after = await stats();
        seen = [before, after];
        if (
          after.inFlight - before.inFlight === 1 &&
          after.completed - before.completed === 1
        ) break;
      }
      const [before, after] = seen!;
      assert.equal(after.exact, true, JSON.stringify(after));
      assert.equal(after.inFlight - before.inFlight, 1, JSON.stringify(seen));
      assert.equal(after.completed - before.completed, 1, JSON.stringify(seen));
      assert.equal(after.unreadable, before.unreadable, JSON.stringify(seen));
      // A store that scans stops at the limit, and says so.
      const some = await stats({ limit: 1 });
      const total = some.inFlight + some.completed + some.unreadable;
      assert.ok(some.exact ? total >= 2 : total <= 1, JSON.stringify(some));
    },
  },
];
