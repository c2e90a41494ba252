// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The conformance cases at the edges of a record's life and of the input (see
 * docs/architecture.md, Expired is absent and Unreadable is in flight). @module
 */

import assert from "node:assert/strict";
import {
  acquired,
  bytes,
  type ConformanceCase,
  plain,
  resolves,
} from "./_context.ts";

/** The cases at the edges, in the order they run. */
export const EDGE_CASES: readonly ConformanceCase[] = [
  {
    name: "the TTL window is the first claim's: completing does not restart it",
    async run({ store, lease, opts, claimed, elapse }) {
      const window = lease * 4;
      const [s, token] = await claimed("ttl", { ttlMs: window });
      await elapse(window * 0.6);
      assert.equal(await store.complete(s, token, plain("t")), "applied");
      assert.equal(
        (await store.claim(s, opts("ttl", { ttlMs: window }))).state,
        "completed",
      );
      await elapse(window * 0.6);
      const after = await store.claim(s, opts("ttl", { ttlMs: window }));
      assert.equal(
        after.state,
        "acquired",
        "the record expired with the first claim's window",
      );
    },
  },
  {
    name: "expired records never block, completed or in flight",
    async run({ store, lease, opts, claimed, elapse }) {
      const window = lease * 2;
      const [done, token] = await claimed("exp", { ttlMs: window });
      assert.equal(await store.complete(done, token, plain("e")), "applied");
      const leaseMs = window * 10;
      const [open] = await claimed("exp", { ttlMs: window, leaseMs });
      await elapse(window + 100);
      const a = await store.claim(done, opts("exp-2"));
      assert.equal(a.state, "acquired");
      if (a.state === "acquired") assert.equal(a.recovered, false);
      assert.equal((await store.claim(open, opts("exp-2"))).state, "acquired");
      assert.equal(
        await store.complete(done, token, plain("old")),
        "lost",
        "the expired record's owner lost it",
      );
    },
  },
  {
    name: "slots are independent and may be up to 256 bytes",
    async run({ store, prefix, opts }) {
      const long = prefix + "x".repeat(256 - prefix.length);
      assert.equal(new TextEncoder().encode(long).byteLength, 256);
      acquired(await store.claim(long, opts("long")));
      const sibling = `${long.slice(0, -1)}y`;
      acquired(await store.claim(sibling, opts("long")));
      await assert.rejects(
        () => store.claim(`${long}z`, opts("long")),
        TypeError,
      );
      await assert.rejects(() => store.claim("", opts("long")), TypeError);
    },
  },
  {
    name:
      "a lease or TTL is a positive number of ms (a fraction rounds up); anything else is a RangeError",
    async run({ store, lease, slot, opts, claimed }) {
      const durations = { leaseMs: 1.5, ttlMs: 60_000.5 };
      const [s, token] = await claimed("dur", durations);
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
      assert.equal(await store.complete(s, token, plain("d")), "applied");
    },
  },
  {
    name: "a claim whose lease ends exactly now no longer blocks (rule 5)",
    needs: ["advanceClock"],
    async run({ store, lease, opts, claimed, advance }) {
      const [s, first] = await claimed("edge", { leaseMs: 1_000 });
      await advance(999);
      const before = await store.claim(s, opts("edge"));
      assert.equal(before.state, "in_flight", "1 ms of lease is left");
      if (before.state === "in_flight") assert.equal(before.retryAfterMs, 1);
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
  },
  {
    name: "a record whose TTL ends exactly now is absent (rule 5)",
    needs: ["advanceClock"],
    async run({ store, opts, claimed, advance }) {
      const [s, token] = await claimed("ttl-edge", { ttlMs: 1_000 });
      assert.equal(await store.complete(s, token, plain("edge")), "applied");
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
      if (after.state === "acquired") assert.equal(after.recovered, false);
    },
  },
  {
    name:
      "waitForChange() resolves at a completion or a release, at once for a settled slot, and when its signal aborts",
    needs: ["waitForChange"],
    async run({ store, claimed, watch }) {
      const never = new AbortController().signal;
      for (const settle of ["complete", "release"] as const) {
        const [s, token] = await claimed("w");
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
      const [s] = await claimed("w");
      const stop = new AbortController();
      const watching = watch(s, stop.signal);
      stop.abort();
      await resolves(watching, "waitForChange() after its abort");
    },
  },
  {
    name:
      "an unreadable record reads as in flight, never throws, and is never taken over",
    needs: ["poison"],
    async run({ store, lease, slot, opts, elapse, poison, assertWritesLost }) {
      const kinds = ["garbage", "truncated", "future_version"] as const;
      for (const kind of kinds) {
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
        await elapse(lease + 50);
        assert.equal(
          (await store.claim(s, opts("p"))).state,
          "in_flight",
          `${kind} after a lease`,
        );
        await assertWritesLost(s, "token", plain("x"));
      }
    },
  },
];
