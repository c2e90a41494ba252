// Copyright 2026 the @idempotent/http authors. MIT license.
/** The cases on claims and writes (docs/architecture.md, Fencing). @module */

import assert from "node:assert/strict";
import {
  assertSameResponse,
  bytes,
  completedResponse,
  type ConformanceCase,
  HELD,
  pattern,
  plain,
} from "./_context.ts";
import type { StoredResponse } from "../store.ts";

/** The cases on claims and writes, in the order they run. */
export const CLAIM_CASES: readonly ConformanceCase[] = [
  {
    name: "many concurrent claims on one slot have exactly one winner",
    async run({ slot, claimAll }) {
      const s = slot();
      const { results, winners } = await claimAll(s, 50, "fp", HELD);
      assert.equal(winners.length, 1, `winners: ${winners.length}`);
      const winner = winners[0]!;
      for (const [i, r] of results.entries()) {
        if (i === winner) continue;
        assert.equal(r.state, "in_flight");
        if (r.state === "in_flight") {
          assert.equal(r.fingerprint, `fp-${winner}`);
          assert.ok(
            r.retryAfterMs >= 1 && r.retryAfterMs <= HELD,
            `retryAfterMs ${r.retryAfterMs}`,
          );
        }
      }
    },
  },
  {
    name: "a fresh claim is acquired with a unique token and recovered: false",
    async run({ store, slot, opts }) {
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
  },
  {
    name:
      "complete then claim returns the response with headers in order and every Set-Cookie",
    async run({ store, opts, claimed }) {
      const [s, token] = await claimed("fp-1");
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
      if (again.state === "completed") assert.equal(again.fingerprint, "fp-1");
      assertSameResponse(completedResponse(again), response);
    },
  },
  {
    name:
      "binary bodies of 0 bytes, 1 byte, 64 KiB and 1 MiB round-trip exactly",
    async run({ store, claimed, assertReplays }) {
      for (const length of [0, 1, 65_536, 65_537, 1_048_576]) {
        const [s, token] = await claimed("bin");
        const response: StoredResponse = {
          status: 200,
          headers: [["content-type", "application/octet-stream"]],
          body: pattern(length, length + 1),
        };
        assert.equal(await store.complete(s, token, response), "applied");
        await assertReplays(s, "bin", response);
      }
    },
  },
  {
    name: "omitted bodies keep their reason",
    async run({ store, claimed, assertReplays }) {
      const reasons = ["too_large", "stream_error", "cancelled"] as const;
      for (const reason of reasons) {
        const [s, token] = await claimed("om");
        const response: StoredResponse = {
          status: 200,
          headers: [["content-type", "text/plain"]],
          body: null,
          omitted: reason,
        };
        assert.equal(await store.complete(s, token, response), "applied");
        await assertReplays(s, "om", response);
      }
    },
  },
  {
    name: "a live claim reads as in flight with the owner's fingerprint",
    async run({ store, opts, claimed }) {
      const [s] = await claimed("owner", { leaseMs: HELD });
      const other = await store.claim(s, opts("other"));
      assert.equal(other.state, "in_flight");
      if (other.state === "in_flight") {
        assert.equal(other.fingerprint, "owner");
        assert.ok(other.retryAfterMs >= 1 && other.retryAfterMs <= HELD);
      }
    },
  },
  {
    name:
      "many concurrent claims on an expired lease have at most one winner, which recovers it",
    async run({ lease, claimed, elapse, claimAll }) {
      // At most: each store of a FailoverStore may pick another winner.
      const [s] = await claimed("first");
      await elapse(lease + 100);
      const { results, winners } = await claimAll(s, 20, "late", HELD);
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
  },
  {
    name:
      "an expired lease is taken over; the stale owner's writes are lost and change nothing",
    async run({ store, lease, opts, claimed, elapse }) {
      const [s, stale] = await claimed("first");
      await elapse(lease + 100);
      // The new owner's lease outlasts the case: only the stale one expires.
      const takeover = await store.claim(s, opts("second", { leaseMs: HELD }));
      assert.equal(takeover.state, "acquired");
      if (takeover.state !== "acquired") return;
      assert.equal(takeover.recovered, true);
      assert.notEqual(takeover.token, stale);
      assert.equal(await store.extend(s, stale, lease), "lost");
      assert.equal(await store.complete(s, stale, plain("stale")), "lost");
      assert.equal(await store.release(s, stale), "lost");
      const seen = await store.claim(s, opts("third"));
      assert.equal(seen.state, "in_flight", "the new owner holds the slot");
      if (seen.state === "in_flight") assert.equal(seen.fingerprint, "second");
      const fresh: StoredResponse = {
        status: 202,
        headers: [["x-owner", "second"]],
        body: bytes("fresh"),
      };
      assert.equal(await store.complete(s, takeover.token, fresh), "applied");
      const done = await store.claim(s, opts("fourth"));
      if (done.state === "completed") assert.equal(done.fingerprint, "second");
      assertSameResponse(completedResponse(done), fresh);
    },
  },
  {
    name: "extend keeps a live owner past its first lease",
    async run({ store, lease, opts, claimed, elapse }) {
      const [s, token] = await claimed("ext");
      await elapse(lease * 0.5);
      assert.equal(await store.extend(s, token, lease * 3), "applied");
      await elapse(lease * 1.2);
      const other = await store.claim(s, opts("ext"));
      assert.equal(other.state, "in_flight", "the extended lease still holds");
      assert.equal(await store.complete(s, token, plain("ok")), "applied");
    },
  },
  {
    name:
      "an owner whose lease ran out but was not taken over still owns the slot",
    async run({ store, lease, opts, claimed, elapse, assertReplays }) {
      const [s, token] = await claimed("late");
      await elapse(lease + 100);
      assert.equal(await store.extend(s, token, lease * 3), "applied");
      assert.equal((await store.claim(s, opts("late"))).state, "in_flight");
      const late: StoredResponse = plain("late");
      assert.equal(await store.complete(s, token, late), "applied");
      await assertReplays(s, "late", late);
    },
  },
  {
    name: "release frees the slot and a released token cannot write",
    async run({ store, lease, opts, claimed }) {
      const [s, token] = await claimed("rel");
      assert.equal(await store.release(s, token), "applied");
      assert.equal(await store.release(s, token), "lost");
      assert.equal(await store.extend(s, token, lease), "lost");
      assert.equal(await store.complete(s, token, plain("x")), "lost");
      const next = await store.claim(s, opts("rel-2"));
      assert.equal(next.state, "acquired");
      if (next.state === "acquired") assert.equal(next.recovered, false);
    },
  },
  {
    name: "a completed record cannot be released, extended or completed again",
    async run({ store, lease, claimed, assertReplays }) {
      const [s, token] = await claimed("done");
      const first: StoredResponse = plain("first");
      assert.equal(await store.complete(s, token, first), "applied");
      assert.equal(await store.release(s, token), "lost");
      assert.equal(await store.extend(s, token, lease), "lost");
      assert.equal(await store.complete(s, token, plain("second")), "lost");
      await assertReplays(s, "done", first);
    },
  },
  {
    name: "writes with a foreign token or on an absent slot are lost",
    async run({ store, slot, opts, claimed, assertWritesLost }) {
      const [s, token] = await claimed("own", { leaseMs: HELD });
      const wrong = `${token}x`;
      await assertWritesLost(s, wrong, plain("x"));
      assert.equal((await store.claim(s, opts("own"))).state, "in_flight");
      const absent = slot();
      await assertWritesLost(absent, token, {
        status: 200,
        headers: [],
        body: null,
        omitted: "too_large",
      });
      assert.equal((await store.claim(absent, opts("own"))).state, "acquired");
    },
  },
];
