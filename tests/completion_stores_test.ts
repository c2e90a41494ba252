// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The terminal rule on real stores: `idempotency()` on a RedisStore whose
 * completion command fails once (in the transport, and before reaching
 * Redis) and on a PostgresStore whose completion fails once replays on the
 * retry, the handler run once. The rule itself, on a MemoryStore with an
 * injected clock, is in `completion_test.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency, type IdempotencyEvent } from "../mod.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { bytesOf, pattern, sameBytes } from "./_support/bytes.ts";
import { post } from "./_support/http.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import {
  POSTGRES_IGNORE,
  postgresStore,
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "./_support/services.ts";
import { FlakyStore } from "./_completion_fixtures.ts";

/** On a real store: a completion that fails once is retried, and a retry at once replays (not 409, not a second run). */
async function failsOnceOn(store: IdempotencyStore, fail: () => void) {
  let runs = 0;
  const events: IdempotencyEvent[] = [];
  const body = pattern(2000, 42);
  const guarded = idempotency(() => {
    runs++;
    fail();
    return new Response(body, { status: 201 });
  }, { scope: "global", store, onEvent: (event) => events.push(event) });
  const key = crypto.randomUUID();
  const first = await guarded(post(key));
  assert.equal(first.status, 201);
  assert.ok(sameBytes(await bytesOf(first), body));
  assert.ok(
    events.some((e) => e.type === "store_error" && e.operation === "complete"),
    "the fault was injected",
  );
  const done = events.find((e) => e.type === "completed");
  assert.equal(done?.type === "completed" && done.outcome, "applied");
  const retry = await guarded(post(key));
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.ok(sameBytes(await bytesOf(retry), body));
  assert.equal(runs, 1);
}

Deno.test({
  name: testName(
    "idempotency() on a RedisStore retries a completion whose command failed once",
    REDIS_IGNORE,
  ),
  ignore: REDIS_IGNORE !== false,
  async fn() {
    const client = await createClient({ url: REDIS_URL }).connect();
    const prefix = `${uniquePrefix("complete")}:`;
    try {
      // The fault is in the transport: the next command after the handler
      // (the completion's EVALSHA) fails as a dropped connection would.
      let failNext = false;
      const flaky = new Proxy(client, {
        get(target, prop) {
          if (prop === "sendCommand") {
            return (...args: unknown[]) => {
              if (failNext) {
                failNext = false;
                return Promise.reject(new Error("Socket closed unexpectedly"));
              }
              return (target.sendCommand as (...a: unknown[]) => unknown)
                .apply(target, args);
            };
          }
          const value = Reflect.get(target, prop, target);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      const store = new RedisStore({ client: flaky, prefix });
      await failsOnceOn(store, () => failNext = true);
      // And with the store wrapped: the write throws before reaching Redis.
      const wrapped = new FlakyStore(new RedisStore({ client, prefix }));
      let armed = false;
      wrapped.faults.complete = () => armed ? (armed = false, "throw") : "pass";
      await failsOnceOn(wrapped, () => armed = true);
    } finally {
      await deleteRedisKeys(prefix);
      await client.quit();
    }
  },
});

Deno.test({
  name: testName(
    "idempotency() on a PostgresStore retries a completion that failed once",
    POSTGRES_IGNORE,
  ),
  ignore: POSTGRES_IGNORE !== false,
  async fn() {
    const { store: inner, drop } = await postgresStore("complete", { max: 2 });
    try {
      const store = new FlakyStore(inner);
      let armed = false;
      store.faults.complete = () => armed ? (armed = false, "throw") : "pass";
      await failsOnceOn(store, () => armed = true);
    } finally {
      await drop();
    }
  },
});

/** Runs `fn` with `Math.random()` pinned just under 1: each backoff wait is its ceiling. */
