// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `/otel`'s one wiring, `store: telemetry.store(store)` and `onEvent:
 * telemetry.onEvent`: the store's calls timed and its reports counted
 * through its `subscribe()` (a FailoverStore's fallbacks and recoveries, its
 * stores' undos), each once however else it is wired, with the log still on.
 * Then a Redis outage under the README's FailoverStore snippet with that
 * wiring, on a redis-server of the test's own and PostgreSQL.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency, type IdempotencyStore, MemoryStore } from "../mod.ts";
import { idempotencyTelemetry } from "../src/otel.ts";
import { StoreError } from "../src/store.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { type RedisCommander, RedisStore } from "../src/stores/redis.ts";
import { post } from "./_support/http.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  redisServerIgnore,
  startRedisServer,
} from "./_support/services.ts";
import { waitFor } from "./_support/time.ts";
import { sdkMetrics } from "./otel/_metrics.ts";
import { memoryPair } from "./stores/_failover_fixtures.ts";

const created = () => new Response("created", { status: 201 });

/** The `idempotency.store` names of the duration points. */
async function storeNames(metrics: ReturnType<typeof sdkMetrics>) {
  const points = (await metrics.collect()).get("idempotency.store.duration")
    ?.points ?? [];
  return [...new Set(points.map((p) => p.attributes["idempotency.store"]))];
}

Deno.test("telemetry.store(failover) counts each fallback and recovery once with no FailoverStore wiring, and once when its onEvent is the telemetry's too; the log stays on", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const { primary, store: bare } = memoryPair();
  const lines: string[] = [];
  const logger = {
    warn: (line: string) => void lines.push(line),
    error: (line: string) => void lines.push(line),
  };
  const handler = idempotency(created, {
    scope: "global",
    store: telemetry.store(bare),
    onEvent: telemetry.onEvent,
    logger,
  });
  primary.down = true;
  for (const key of ["a", "b"]) await (await handler(post(key))).text();
  assert.equal(await metrics.sum("idempotency.failover.fallbacks"), 2);
  assert.equal(lines.length, 1, "the first fallback at once");
  assert.match(lines[0]!, /\] fallback: /);
  primary.down = false;
  await (await handler(post("a"))).text();
  assert.equal(
    await metrics.sum("idempotency.failover.recoveries", {
      "idempotency.failover.copied": true,
    }),
    1,
  );
  assert.deepEqual(await storeNames(metrics), ["failover"]);

  // Wired both ways (the store's onEvent and store()): still once each.
  await using twice = sdkMetrics();
  const both = idempotencyTelemetry({ meterProvider: twice.meterProvider });
  const pair = memoryPair();
  const store = new FailoverStore({
    primary: pair.primary,
    fallback: pair.fallback,
    onEvent: both.onFailoverEvent,
  });
  const guarded = idempotency(created, {
    scope: "global",
    store: both.store(store, "idem"),
    onEvent: both.onEvent,
    logger: false,
  });
  pair.primary.down = true;
  await (await guarded(post("c"))).text();
  assert.equal(await twice.sum("idempotency.failover.fallbacks"), 1);
  assert.deepEqual(await storeNames(twice), ["idem"]);
});

Deno.test("telemetry.store() counts the undos of a FailoverStore's primary once, even with the primary wrapped too; a store's default name is its class's, or 'store'", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  let failNext = 0;
  const client: RedisCommander = {
    sendCommand(args) {
      if (args[0] === "SET" && failNext > 0) {
        failNext--;
        return Promise.reject(new Error("Socket closed unexpectedly"));
      }
      return Promise.resolve(args[0] === "SET" ? null : 1); // free; applied
    },
  };
  const redis = telemetry.store(new RedisStore({ client }));
  const failover = telemetry.store(
    new FailoverStore({ primary: redis, fallback: new MemoryStore() }),
  );
  const options = { fingerprint: "f", leaseMs: 60_000, ttlMs: 60_000 };
  failNext = 1;
  assert.equal((await failover.claim("s", options)).state, "acquired");
  const undone = () =>
    metrics.sum("idempotency.undos", { "idempotency.undo.outcome": "applied" });
  await waitFor("the undo", async () => await undone() === 1);
  assert.equal(await metrics.sum("idempotency.failover.fallbacks"), 1);
  const plain: IdempotencyStore = {
    claim: () => Promise.reject(new StoreError("down", { operation: "claim" })),
    complete: () => Promise.resolve("lost" as const),
    release: () => Promise.resolve("lost" as const),
    extend: () => Promise.resolve("lost" as const),
  };
  await telemetry.store(plain).claim("s", options).catch(() => {});
  assert.deepEqual((await storeNames(metrics)).sort(), [
    "failover",
    "redis",
    "store",
  ]);
  assert.equal(await undone(), 1, "once, not once per wrapper");
});

/** The console, stubbed to read the default log. */
const terminal = globalThis.console;

integrationTest(
  "a Redis outage under the README's FailoverStore snippet with the one /otel wiring: an idempotency.failover.fallbacks point and the fallback line at the first request, a recovery point and line once Redis is back",
  (await redisServerIgnore()) || POSTGRES_IGNORE,
  async () => {
    await using server = await startRedisServer();
    await using pg = await postgresSchema("otel_failover");
    await using metrics = sdkMetrics();
    const redis = createClient({ url: server.url, disableOfflineQueue: true });
    redis.on("error", () => {});
    await redis.connect();
    const kept: string[] = [];
    const { warn, info, error } = terminal;
    for (const level of ["warn", "info", "error"] as const) {
      terminal[level] = (...data: unknown[]) =>
        void kept.push(`${level} ${data.join(" ")}`);
    }
    try {
      const store = new FailoverStore({
        primary: new RedisStore({ client: redis, timeoutMs: 250 }),
        fallback: new PostgresStore({
          sql: pg.sql,
          table: `${pg.schema}.idempotency_keys`,
        }),
      });
      await store.migrate();
      // The README's one line, on the test's meter provider.
      const telemetry = idempotencyTelemetry({
        meterProvider: metrics.meterProvider,
      });
      const handler = idempotency(created, {
        store: telemetry.store(store),
        scope: () => "alice",
        onEvent: telemetry.onEvent,
      });
      await (await handler(post("before"))).text();
      assert.equal(await metrics.sum("idempotency.failover.fallbacks"), 0);

      await server.kill();
      await waitFor("the client to notice", () => !redis.isReady);
      const during = await handler(post("during"));
      assert.equal(during.status, 201);
      await during.text();
      assert.equal(await metrics.sum("idempotency.failover.fallbacks"), 1);
      assert.equal(kept.length, 1);
      assert.match(
        kept[0]!,
        /^warn \[@idempotent\/http\] fallback: .*Redis claim failed: The client is offline: the Redis client is connecting or reconnecting \(node-redis `isReady` false\): Redis is unreachable/,
      );

      await server.restart();
      await waitFor("the client to reconnect", () => redis.isReady);
      const retry = await handler(post("during"));
      assert.equal(retry.headers.get("idempotent-replayed"), "true");
      await retry.text();
      assert.equal(
        await metrics.sum("idempotency.failover.recoveries", {
          "idempotency.failover.copied": true,
        }),
        1,
      );
      assert.match(kept[1] ?? "", /^info \[@idempotent\/http\] recovered: /);
      assert.equal(
        await metrics.sum("idempotency.requests", {
          "idempotency.outcome": "executed",
        }),
        2,
      );
      assert.deepEqual(await storeNames(metrics), ["failover"]);
    } finally {
      Object.assign(terminal, { warn, info, error });
      redis.destroy();
    }
  },
);
