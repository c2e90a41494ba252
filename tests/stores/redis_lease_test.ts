// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's leases on the real Redis of this machine: the lease floor of
 * a claim and of an extend, the TTL every write keeps, the hint for a value
 * it cannot read, and how it reads the claim script's replies.
 *
 * node-redis and ioredis keep sockets and timers of their own (reconnect,
 * ping, offline queues) for a while after they close, so the tests that use
 * them turn the op and resource sanitizers off; the store's own timer is
 * checked with sanitizers on, on stub clients.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RedisStore } from "../../src/stores/redis.ts";
import type { StoredResponse } from "../../src/store.ts";
import { testName, uniquePrefix } from "../_support/services.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import { claimReply } from "../../src/stores/_redis_scripts.ts";
import { Admin, ignore, opts } from "./_redis_fixtures.ts";

Deno.test({
  name: testName(
    "RedisStore's lease floor is ttl − lease on claim and PTTL − lease on extend, and every write keeps the key's TTL",
    ignore,
  ),
  ignore: ignore !== false,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const admin = new Admin();
    const prefix = `${uniquePrefix("floor")}:`;
    const store = new RedisStore({ client: admin.client, prefix });
    const raw = async (slot: string) =>
      String(await admin.client.get(prefix + slot));
    const pttl = (slot: string) => admin.client.pttl(prefix + slot);
    try {
      const claim = await store.claim("a", opts);
      assert.equal(claim.state, "acquired");
      if (claim.state !== "acquired") return;
      // The claim's floor: exactly ttl − lease, the lease on the server's clock.
      assert.equal(
        await raw("a"),
        `idem2f${opts.ttlMs - opts.leaseMs}:${claim.token}`,
      );
      const held = await store.claim("a", opts);
      assert.equal(held.state, "in_flight");
      if (held.state !== "in_flight") return;
      // The hint is what is left of the lease (PTTL − floor), not the TTL.
      assert.ok(held.retryAfterMs <= opts.leaseMs, `${held.retryAfterMs}`);
      assert.ok(
        held.retryAfterMs > opts.leaseMs - 1_000,
        `${held.retryAfterMs}`,
      );

      const before = await pttl("a");
      assert.equal(await store.extend("a", claim.token, 20_000), "applied");
      const after = await pttl("a");
      const floor = Number(/^idem2f(\d+):/.exec(await raw("a"))?.[1]);
      // extend's floor is PTTL − lease, read between the two PTTLs around it.
      assert.ok(
        floor + 20_000 <= before && floor + 20_000 >= after,
        `${floor}`,
      );
      assert.ok(after > 0 && after <= before, `extend keeps the TTL: ${after}`);
      const extended = await store.claim("a", opts);
      assert.equal(extended.state, "in_flight");
      if (extended.state === "in_flight") {
        assert.ok(extended.retryAfterMs > 19_000, `${extended.retryAfterMs}`);
        assert.ok(extended.retryAfterMs <= 20_000, `${extended.retryAfterMs}`);
      }

      const omitted: StoredResponse = {
        status: 200,
        headers: [["x-a", "1"]],
        body: null,
        omitted: "too_slow",
      };
      assert.equal(await store.complete("a", claim.token, omitted), "applied");
      const completed = await pttl("a");
      assert.ok(
        completed > 0 && completed <= after,
        `complete keeps the TTL (KEEPTTL): ${completed}`,
      );
      // The record of an omitted body replays as omitted, with its reason.
      const replay = await store.claim("a", opts);
      assert.equal(replay.state, "completed");
      if (replay.state === "completed") {
        assert.deepEqual(replay.response, omitted);
      }
    } finally {
      await deleteRedisKeys(prefix);
      admin.close();
    }
  },
});

Deno.test({
  name: testName(
    "RedisStore hints a value it cannot read at the lease, or at its TTL when that ends sooner",
    ignore,
  ),
  ignore: ignore !== false,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const admin = new Admin();
    const prefix = `${uniquePrefix("hint")}:`;
    const store = new RedisStore({ client: admin.client, prefix });
    const hint = async (slot: string) => {
      const claim = await store.claim(slot, opts);
      assert.equal(claim.state, "in_flight", slot);
      assert.equal(claim.state === "in_flight" && claim.fingerprint, null);
      return claim.state === "in_flight" ? claim.retryAfterMs : NaN;
    };
    try {
      await admin.client.set(`${prefix}no-ttl`, "foreign");
      await admin.client.set(`${prefix}long`, "foreign", "PX", 60_000);
      await admin.client.set(`${prefix}short`, "foreign", "PX", 1_500);
      assert.equal(await hint("no-ttl"), opts.leaseMs);
      assert.equal(await hint("long"), opts.leaseMs);
      const short = await hint("short");
      assert.ok(short <= 1_500 && short > 500, `${short}`);
    } finally {
      await deleteRedisKeys(prefix);
      admin.close();
    }
  },
});

Deno.test("RedisStore reads the claim script's replies: acquired from recovered, in-flight hints at least 1 ms", () => {
  const token = "t".repeat(36) + "fp";
  assert.deepEqual(claimReply(1, token, 5_000), {
    state: "acquired",
    token,
    recovered: false,
  });
  assert.deepEqual(claimReply(2, token, 5_000), {
    state: "acquired",
    token,
    recovered: true,
  });
  for (const [left, expected] of [[2, 2], [1, 1], [0, 1], [-3, 1]]) {
    assert.deepEqual(claimReply([0, "fp", left], token, 5_000), {
      state: "in_flight",
      fingerprint: "fp",
      retryAfterMs: expected,
    }, `${left}`);
  }
  // Unreadable, with the script's hint or else the lease.
  assert.deepEqual(claimReply([2, 1_200], token, 5_000), {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: 1_200,
  });
  assert.deepEqual(claimReply([2, 0], token, 5_000), {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: 5_000,
  });
  assert.deepEqual(claimReply([3, "garbage", 700], token, 5_000), {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: 700,
  });
});
