// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `FailoverStore.peek()` while one side is really down (docs/architecture.md,
 * Inspect and forget: "one store's when the other throws"): two redis-servers
 * of the test's own, one killed or paused at a time, and `peek` answers what
 * the other holds, never throwing while one answers; both down, a
 * `StoreError` naming `peek`. The in-process cases are in
 * tests/stores/failover_admin_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { FailoverStore } from "../../src/stores/failover.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { type IdempotencyStore, StoreError } from "../../src/store.ts";
import {
  haveRedisServer,
  startRedisServer,
} from "../_support/private_servers.ts";
import { integrationTest } from "../_support/services.ts";
import { waitFor } from "../_support/time.ts";
import { nodeRedis, ok, opts, token } from "./_failover_fixtures.ts";

const IGNORE = await haveRedisServer() ? false : "no redis-server binary";

/** A completed record of `text` at `slot` in `store`. */
async function complete(store: IdempotencyStore, slot: string, text: string) {
  const claim = await store.claim(slot, opts("fp"));
  assert.equal(await store.complete(slot, token(claim), ok(text)), "applied");
}

integrationTest(
  "FailoverStore.peek() with one store killed or paused answers the other's record; both down, a StoreError naming peek",
  IGNORE,
  async () => {
    await using one = await startRedisServer();
    await using two = await startRedisServer();
    const [c1, c2] = [await nodeRedis(one.url), await nodeRedis(two.url)];
    try {
      const prefix = "strength-peek:";
      const primary = new RedisStore({ client: c1, prefix, timeoutMs: 300 });
      const fallback = new RedisStore({ client: c2, prefix, timeoutMs: 300 });
      const store = new FailoverStore({ primary, fallback });
      await complete(primary, "p", "primary's");
      await complete(fallback, "f", "fallback's");
      await fallback.claim("both", opts("in flight")); // the fallback in flight
      await complete(primary, "both", "primary's");
      assert.equal((await store.peek("both")).state, "completed");

      // The primary killed: the fallback's records, and absent where it has none.
      await one.kill();
      const f = await store.peek("f");
      assert.equal(f.state, "completed");
      assert.ok(f.state === "completed" && f.bodyBytes === 10);
      assert.deepEqual(await store.peek("p"), { state: "absent" });
      const both = await store.peek("both");
      assert.equal(both.state, "in_flight", "the fallback's claim, alone");

      // The primary back (empty), the fallback paused: the primary's answer
      // once the fallback's call misses its deadline.
      await one.restart();
      await waitFor("the primary's client back", () => c1.isReady);
      await complete(primary, "p", "primary again");
      two.pause();
      try {
        const p = await store.peek("p");
        assert.ok(p.state === "completed" && p.bodyBytes === 13, p.state);
        assert.deepEqual(await store.peek("f"), { state: "absent" });

        // Both down: one error, naming the operation.
        await one.kill();
        const error = await store.peek("f").catch((e) => e);
        assert.ok(error instanceof StoreError, String(error));
        assert.equal(error.operation, "peek");
      } finally {
        two.resume();
      }
    } finally {
      c1.destroy();
      c2.destroy();
    }
  },
);
