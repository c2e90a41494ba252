// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * FailoverStore: the conformance suite on Redis + PostgreSQL and on two
 * MemoryStores, and the routing rules and outcomes on MemoryStores. When it
 * trusts its fallback is in `failover_fallback_test.ts`; outages of a
 * redis-server of the test's own in `failover_outage_test.ts`.
 *
 * node-redis and postgres.js keep sockets and timers of their own for a while
 * after they close, so the integration tests turn the op and resource
 * sanitizers off (as the Redis and PostgreSQL store tests do).
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency } from "../../src/idempotency.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { FailoverStore } from "../../src/stores/failover.ts";
import { type IdempotencyStore, StoreError } from "../../src/store.ts";
import {
  type PoisonKind,
  storeConformance,
} from "../../src/testing/testing.ts";
import { REDIS_URL, uniquePrefix } from "../_support/services.ts";
import { deleteRedisKeys, plantRedisPoison } from "../_support/redis.ts";
import { FakeClock, sleep } from "../_support/time.ts";
import { post } from "../_support/http.ts";
import {
  memoryPair,
  nodeRedis,
  ok,
  opts,
  pgFallback,
  SERVICES_IGNORE,
  Switchable,
  token,
} from "./_failover_fixtures.ts";

/** The inner tokens of a `b:` token (its format is documented). */
function split(both: string): { primary: string; fallback: string } {
  const match = /^b:(\d+)\.(\d+):/.exec(both);
  assert.ok(match, `not a b: token: ${both}`);
  const start = match[0].length;
  const p = Number(match[1]);
  return {
    primary: both.slice(start, start + p),
    fallback: both.slice(start + p),
  };
}

/** Asserts that `call` rejects with a StoreError carrying both stores' errors. */
async function failsWithBothCauses(
  call: Promise<unknown>,
  operation: string,
): Promise<void> {
  const error = await call.then(() => null, (e: unknown) => e);
  assert.ok(error instanceof StoreError);
  assert.equal(error.operation, operation);
  assert.ok(error.cause instanceof AggregateError);
  assert.equal(error.cause.errors.length, 2);
}

// --- the shared suite -------------------------------------------------------

storeConformance({
  name: "FailoverStore (MemoryStore, MemoryStore)",
  setup() {
    const time = new FakeClock();
    const clock = () => time.now();
    const advance = (ms: number) => time.advance(ms);
    return Promise.resolve({
      store: new FailoverStore({
        primary: new MemoryStore({ clock }),
        fallback: new MemoryStore({ clock }),
      }),
      elapse: advance,
      advanceClock: advance,
    });
  },
});

storeConformance({
  name: "FailoverStore (RedisStore, PostgresStore)",
  ignore: SERVICES_IGNORE,
  leaseMs: 300,
  async setup() {
    const client = await nodeRedis(REDIS_URL);
    const prefix = `${uniquePrefix("failconf")}:`;
    const fallback = await pgFallback();
    const store = new FailoverStore({
      primary: new RedisStore({ client, prefix }),
      fallback: fallback.store,
    });
    return {
      store,
      elapse: sleep,
      // Unreadable values planted in the primary: it answers in flight, and
      // the fallback is never consulted.
      poison: (slot: string, kind: PoisonKind) =>
        plantRedisPoison(
          (args) => client.sendCommand(args),
          prefix + slot,
          kind,
        ),
      async teardown() {
        try {
          await deleteRedisKeys(prefix);
        } finally {
          client.destroy();
          await fallback.drop();
        }
      },
    };
  },
});

// --- routing and outcomes, on MemoryStores ----------------------------------

Deno.test("FailoverStore validates its options", () => {
  const m = new MemoryStore();
  assert.throws(
    () =>
      new FailoverStore({
        primary: {} as IdempotencyStore,
        fallback: m,
      }),
    TypeError,
  );
  assert.throws(
    () => new FailoverStore({ primary: m, fallback: m }),
    TypeError,
  );
  assert.throws(
    () =>
      new FailoverStore({
        primary: m,
        fallback: new MemoryStore(),
        strict: "yes" as unknown as boolean,
      }),
    TypeError,
  );
});

Deno.test("FailoverStore.claim() on a fresh slot owns both stores with a b: token", async () => {
  const { primary, fallback, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  assert.match(t, /^b:\d+\.\d+:/);
  const inner = split(t);
  // Each store holds its own claim under its own token.
  assert.equal(await primary.inner.extend("s", inner.primary, 1000), "applied");
  assert.equal(
    await fallback.inner.extend("s", inner.fallback, 1000),
    "applied",
  );
  assert.equal(await primary.inner.extend("s", inner.fallback, 1000), "lost");
  assert.equal(await store.complete("s", t, ok("one")), "applied");
  // Both hold the completed record.
  assert.equal((await primary.inner.claim("s", opts("fp"))).state, "completed");
  assert.equal(
    (await fallback.inner.claim("s", opts("fp"))).state,
    "completed",
  );
  assert.deepEqual(events, []);
});

Deno.test("FailoverStore answers a primary hit with one primary round trip", async () => {
  const { primary, fallback, store } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  assert.equal((await store.claim("s", opts("fp"))).state, "in_flight");
  await store.complete("s", t, ok("one"));
  primary.calls = 0;
  fallback.calls = 0;
  assert.equal((await store.claim("s", opts("fp"))).state, "completed");
  assert.equal(primary.calls, 1);
  assert.equal(fallback.calls, 0);
});

Deno.test("FailoverStore writes with malformed or foreign tokens are lost everywhere", async () => {
  const { store, primary, fallback } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  const inner = split(t);
  for (
    const bad of [
      "",
      "x",
      "q:abc",
      inner.primary,
      `${t}x`,
      t.slice(0, -1),
      `b:0.${inner.fallback.length}:${inner.fallback}`,
      `p:${inner.fallback}`,
      `f:${inner.primary}`,
    ]
  ) {
    assert.equal(await store.extend("s", bad, 1000), "lost", bad);
    assert.equal(await store.complete("s", bad, ok("bad")), "lost", bad);
    assert.equal(await store.release("s", bad), "lost", bad);
  }
  // Nothing changed in either store.
  assert.equal((await primary.inner.claim("s", opts("x"))).state, "in_flight");
  assert.equal((await fallback.inner.claim("s", opts("x"))).state, "in_flight");
  assert.equal(await store.complete("s", t, ok("real")), "applied");
});

Deno.test("FailoverStore falls back while the primary throws, and recovers the record after", async () => {
  const { primary, fallback, store, events } = memoryPair();
  primary.down = true;
  const t = token(await store.claim("s", opts("fp")));
  assert.ok(t.startsWith("f:"));
  assert.equal(events[0]?.type, "fallback");
  primary.down = false;
  // An f: token never reaches the primary, even once it is back.
  primary.calls = 0;
  assert.equal(await store.extend("s", t, 1000), "applied");
  assert.equal(await store.complete("s", t, ok("outage")), "applied");
  assert.equal(primary.calls, 0);
  // The retry: primary miss, fallback completed, copied.
  const again = await store.claim("s", opts("fp"));
  assert.equal(again.state, "completed");
  assert.deepEqual(events.map((e) => e.type), ["fallback", "recovered"]);
  assert.deepEqual(events[1], { type: "recovered", slot: "s", copied: true });
  fallback.calls = 0;
  assert.equal((await store.claim("s", opts("fp"))).state, "completed");
  assert.equal(fallback.calls, 0, "the next retry is served by the primary");
});

Deno.test("FailoverStore does not copy a record claimed with another fingerprint into the primary", async () => {
  const { primary, store, events } = memoryPair();
  primary.down = true;
  const t = token(await store.claim("s", opts("original")));
  await store.complete("s", t, ok("outage"));
  primary.down = false;
  // The key reused for another request: the middleware will answer 422.
  const reused = await store.claim("s", opts("other"));
  assert.equal(reused.state, "completed");
  if (reused.state === "completed") {
    assert.equal(reused.fingerprint, "original");
  }
  assert.deepEqual(events.at(-1), {
    type: "recovered",
    slot: "s",
    copied: false,
  });
  // Had it been copied, the primary would hold fingerprint "other", and the
  // original's retry would be refused as a mismatch.
  const retry = await store.claim("s", opts("original"));
  assert.equal(retry.state, "completed");
  if (retry.state === "completed") assert.equal(retry.fingerprint, "original");
  const direct = await primary.inner.claim("s", opts("original"));
  if (direct.state === "completed") {
    assert.equal(direct.fingerprint, "original");
  }
});

Deno.test("FailoverStore releases the primary claim when the fallback holds the slot in flight", async () => {
  const { primary, store } = memoryPair();
  primary.down = true;
  const owner = token(await store.claim("s", opts("fp")));
  primary.down = false;
  const seen = await store.claim("s", opts("fp"));
  assert.equal(seen.state, "in_flight");
  // The primary holds nothing: its claim was released.
  assert.equal(
    (await primary.inner.claim("s", opts("probe"))).state,
    "acquired",
  );
  assert.equal(await store.complete("s", owner, ok("x")), "applied");
});

Deno.test("FailoverStore keeps renewing a b: claim whose primary record vanished (a Redis restart)", async () => {
  const { primary, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  // The primary loses the record, as a restarted Redis without persistence does.
  assert.equal(await primary.inner.release("s", split(t).primary), "applied");
  // The heartbeat's extend must stay `applied`: a `lost` would stop it, the
  // fallback's lease would run out while the handler runs, and a retry would
  // take the slot over and run the handler a second time.
  assert.equal(await store.extend("s", t, 30_000), "applied");
  assert.deepEqual(events.at(-1), {
    type: "diverged",
    operation: "extend",
    slot: "s",
    primary: "lost",
    fallback: "applied",
  });
  assert.equal((await store.claim("s", opts("fp"))).state, "in_flight");
  assert.equal(await store.complete("s", t, ok("done")), "applied");
  assert.equal((await store.claim("s", opts("fp"))).state, "completed");
});

Deno.test("FailoverStore b: writes: one store throwing leaves the other's answer; both throwing throws", async () => {
  const { primary, fallback, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  primary.down = true;
  assert.equal(await store.extend("s", t, 30_000), "applied");
  assert.equal(events.at(-1)?.type, "write_failed");
  primary.down = false;
  fallback.down = true;
  assert.equal(await store.extend("s", t, 30_000), "applied");
  const last = events.at(-1);
  assert.ok(last?.type === "write_failed" && last.store === "fallback");
  primary.down = true;
  await failsWithBothCauses(store.complete("s", t, ok("x")), "complete");
});

Deno.test("FailoverStore b: writes are lost when the store whose answer stands lost the slot", async () => {
  const { primary, fallback, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  // The fallback lost the slot, the primary did not: the fallback's answer.
  assert.equal(await fallback.inner.release("s", split(t).fallback), "applied");
  assert.equal(await store.extend("s", t, 30_000), "lost");
  assert.deepEqual(events.at(-1), {
    type: "diverged",
    operation: "extend",
    slot: "s",
    primary: "applied",
    fallback: "lost",
  });
  // One store throws: the other's "lost" stands, from either side.
  primary.down = true;
  assert.equal(await store.extend("s", t, 30_000), "lost");
  primary.down = false;
  const u = token(await store.claim("u", opts("fp")));
  assert.equal(await primary.inner.release("u", split(u).primary), "applied");
  fallback.down = true;
  assert.equal(await store.extend("u", u, 30_000), "lost");
  assert.ok(events.at(-1)?.type === "write_failed");
});

Deno.test("FailoverStore.claim() throws a StoreError with both causes when both stores are down", async () => {
  const { primary, fallback, store } = memoryPair();
  primary.down = true;
  fallback.down = true;
  await failsWithBothCauses(store.claim("s", opts("fp")), "claim");
});

Deno.test("FailoverStore ignores an onEvent that throws", async () => {
  const primary = new Switchable(new MemoryStore());
  primary.down = true;
  const store = new FailoverStore({
    primary,
    fallback: new MemoryStore(),
    onEvent: () => {
      throw new Error("listener bug");
    },
  });
  assert.ok(token(await store.claim("s", opts("fp"))).startsWith("f:"));
});

Deno.test("FailoverStore through the middleware: the fallback mirror survives a primary that forgets", async () => {
  const primary = new Switchable(new MemoryStore());
  const fallback = new MemoryStore();
  let runs = 0;
  const store = new FailoverStore({ primary, fallback });
  const handler = idempotency(() => {
    runs++;
    return new Response(`run ${runs}`, { status: 201 });
  }, { scope: "global", store });
  assert.equal((await handler(post("k"))).status, 201);
  // The primary restarts empty.
  (primary as { inner: IdempotencyStore }).inner = new MemoryStore();
  const retry = await handler(post("k"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(await retry.text(), "run 1");
  assert.equal(runs, 1);
});

Deno.test("FailoverStore on two MemoryStores runs a key once through the middleware and replays it", async () => {
  let runs = 0;
  const store = new FailoverStore({
    primary: new MemoryStore(),
    fallback: new MemoryStore(),
  });
  const handler = idempotency(() => {
    runs++;
    return new Response("charged", { status: 201 });
  }, { scope: "global", store });
  assert.equal((await handler(post("c-1"))).status, 201);
  const retry = await handler(post("c-1"));
  assert.equal(retry.headers.get("Idempotent-Replayed"), "true");
  assert.equal(runs, 1);
});

Deno.test("FailoverStore.migrate() resolves on stores without migrate(), and claims go on", async () => {
  const store = new FailoverStore({
    primary: new MemoryStore(),
    fallback: new MemoryStore(),
  });
  await store.migrate();
  assert.equal((await store.claim("slot-1", opts("f"))).state, "acquired");
});
