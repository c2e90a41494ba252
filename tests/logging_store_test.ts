// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The log beside `onEvent`, and the store's reports in it with no wiring
 * (docs/architecture.md, Loud by default): a FailoverStore's fallbacks and
 * recoveries reach the middleware's `logger` through the store's
 * `subscribe()`, rate-limited like the other kinds, once per store and
 * logger; the stores' undo reports reach a subscribed listener. Then the
 * same against real servers: an unconnected node-redis client under an app
 * with `onEvent`, and a Redis outage under the README's FailoverStore
 * snippet with default options.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { createClient } from "redis";
import { idempotency, type IdempotencyOptions } from "../mod.ts";
import type { IdempotencyEvent } from "../src/events.ts";
import { StoreError, type StoreReport } from "../src/store.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { type RedisCommander, RedisStore } from "../src/stores/redis.ts";
import { idempotencyOn } from "./_support/idempotency.ts";
import { post } from "./_support/http.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  redisServerIgnore,
  startRedisServer,
} from "./_support/services.ts";
import { FakeClock, waitFor } from "./_support/time.ts";
import { memoryPair } from "./stores/_failover_fixtures.ts";

/** The log's documented minute: a kind's later lines are counted for it. */
const LOG_INTERVAL_MS = 60_000;

type Level = "info" | "warn" | "error";

/** A logger that keeps its lines with their level; `info` unless `warnOnly`. */
function lines(warnOnly = false) {
  const kept: { level: Level; line: string }[] = [];
  const at = (level: Level) => (line: string) =>
    void kept.push({ level, line });
  const logger = { warn: at("warn"), error: at("error") };
  return {
    kept,
    logger: warnOnly ? logger : { ...logger, info: at("info") },
    kinds: () => kept.map(({ level, line }) => `${level} ${kindOf(line)}`),
  };
}

/** `fallback` of `[@idempotent/http] fallback: …`. */
const kindOf = (line: string) => /^\[@idempotent\/http\] (\w+)/.exec(line)?.[1];

const created = () => new Response("created", { status: 201 });

Deno.test("a FailoverStore under idempotency() logs its first fallback at once with the primary's error, counts the rest for the minute, logs its recovery with info; its own onEvent still hears each", async () => {
  const { primary, store, events } = memoryPair();
  const clock = new FakeClock();
  const log = lines();
  const seenInHandler: number[] = [];
  const handler = idempotencyOn(clock, () => {
    seenInHandler.push(log.kept.length);
    return created();
  }, {
    scope: "global",
    store,
    logger: log.logger,
  });

  primary.down = true;
  for (const key of ["k0", "k1", "k2", "k3"]) {
    const res = await handler(post(key));
    assert.equal(res.status, 201, "served by the fallback");
    await res.body?.cancel();
  }
  assert.deepEqual(seenInHandler, [1, 1, 1, 1], "written before the handler");
  assert.deepEqual(log.kinds(), ["warn fallback"]);
  assert.match(
    log.kept[0]!.line,
    /^\[@idempotent\/http\] fallback: the FailoverStore's primary store failed a claim, so claims go to the fallback store alone while it fails \(requests are still served\): StoreError: claim: ECONNREFUSED$/,
  );
  await clock.advance(LOG_INTERVAL_MS - 1);
  assert.equal(log.kept.length, 1, "nothing more within the minute");
  await clock.advance(1);
  assert.deepEqual(log.kinds(), ["warn fallback", "warn fallback"]);
  assert.match(
    log.kept[1]!.line,
    /fallback happened 3 times in the last minute; the latest: fallback: .*ECONNREFUSED/,
  );

  // The primary is back and empty of k0: the fallback's record answers.
  primary.down = false;
  const replay = await handler(post("k0"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(await replay.text(), "created");
  assert.deepEqual(log.kinds().slice(2), ["info recovered"]);
  assert.match(
    log.kept[2]!.line,
    /recovered: the FailoverStore's primary store answers again, and a key it did not hold was answered from the fallback's record \(copied into the primary\)$/,
  );
  assert.deepEqual(events.map((e) => e.type), [
    "fallback",
    "fallback",
    "fallback",
    "fallback",
    "recovered",
  ]);
});

Deno.test("a FailoverStore's reports are logged once per logger however many middlewares share the store; a logger without info gets warn; logger: false gets none; a store without subscribe() is fine", async () => {
  const { primary, store } = memoryPair();
  const shared = lines(true);
  const silentSeen: IdempotencyEvent["type"][] = [];
  const make = (options: Partial<IdempotencyOptions>) =>
    idempotency(created, { scope: "global", store, ...options });
  const a = make({ logger: shared.logger });
  const b = make({ logger: shared.logger, onEvent: () => {} });
  const quiet = make({
    logger: false,
    onEvent: (e) => void silentSeen.push(e.type),
  });
  primary.down = true;
  for (const handler of [a, b, quiet]) {
    await (await handler(post("k"))).body?.cancel();
  }
  assert.deepEqual(shared.kinds(), ["warn fallback"], "one line, not one each");
  primary.down = false;
  await (await a(post("k"))).text();
  assert.deepEqual(shared.kinds(), ["warn fallback", "warn recovered"]);
  assert.deepEqual(silentSeen, ["replayed"]);

  // The fallback fails under a run claimed on both, then for a new claim.
  const pair = memoryPair();
  const log = lines();
  const handler = idempotency(() => {
    pair.fallback.down = true;
    return created();
  }, { scope: "global", store: pair.store, logger: log.logger });
  await (await handler(post("first"))).body?.cancel();
  assert.deepEqual(log.kinds(), ["warn write_failed"]);
  assert.match(
    log.kept[0]!.line,
    /^\[@idempotent\/http\] write_failed: the FailoverStore's fallback store failed a complete, so the other store's answer stands and the two differ on that key until it expires: StoreError: complete: ECONNREFUSED$/,
  );
  const alone = await handler(post("second"));
  assert.equal(alone.status, 201);
  await alone.body?.cancel();
  assert.deepEqual(log.kinds().slice(1), ["warn fallback_unavailable"]);
  assert.match(
    log.kept[1]!.line,
    /fallback_unavailable: the FailoverStore's fallback store failed a claim, so a key was claimed on the primary alone .*: StoreError: claim: ECONNREFUSED$/,
  );
});

Deno.test("a FailoverStore whose fallback never answered refuses the claim (503), and its line says so and names migrate(), not a claim on the primary alone", async () => {
  const { fallback, store, events } = memoryPair();
  fallback.down = true; // as a fallback table never migrated
  const log = lines();
  const handler = idempotency(created, {
    scope: "global",
    store,
    logger: log.logger,
  });
  const refused = await handler(post("k"));
  assert.equal(refused.status, 503);
  await refused.body?.cancel();
  assert.deepEqual(events.map((e) => e.type), ["fallback_unavailable"]);
  assert.equal((events[0] as { refused?: true }).refused, true);
  // The store's report first, then the middleware's own 503 line.
  assert.deepEqual(log.kinds(), [
    "warn fallback_unavailable",
    "error store_error",
  ]);
  assert.match(
    log.kept[1]!.line,
    /has not answered once .*run 'await store\.migrate\(\)' at boot/,
  );
  assert.match(
    log.kept[0]!.line,
    /fallback_unavailable: the FailoverStore's fallback store failed a claim, so the request was refused \(503\): the fallback has never answered \(run 'await store\.migrate\(\)' at boot: a missing table fails so\): StoreError: claim: ECONNREFUSED$/,
  );
  assert.doesNotMatch(log.kept[0]!.line, /primary alone/);
});

Deno.test("however many middlewares share a FailoverStore and a logger, each fallback and recovery is told exactly once, and a kind's lines are a minute apart", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 4 }),
      fc.array(
        fc.record({
          via: fc.nat(3),
          down: fc.boolean(),
          key: fc.constantFrom("a", "b", "c", "d"),
          wait: fc.integer({ min: 0, max: 2 * LOG_INTERVAL_MS }),
        }),
        { maxLength: 25 },
      ),
      async (middlewares, steps) => {
        const { primary, store, events } = memoryPair();
        const clock = new FakeClock();
        const told: { at: number; line: string }[] = [];
        const keep = (line: string) =>
          void told.push({ at: clock.now(), line });
        const logger = { warn: keep, error: keep, info: keep };
        const handlers = Array.from(
          { length: middlewares },
          () =>
            idempotencyOn(clock, created, {
              scope: "global",
              store,
              logger,
            }),
        );
        for (const { via, down, key, wait } of steps) {
          await clock.advance(wait, () => Promise.resolve());
          primary.down = down;
          const res = await handlers[via % middlewares]!(post(key));
          await res.body?.cancel();
        }
        await clock.advance(LOG_INTERVAL_MS, () => Promise.resolve());
        for (const kind of ["fallback", "recovered"]) {
          const ofKind = new RegExp(`\\] ${kind}[: ]`);
          const mine = told.filter((t) => ofKind.test(t.line));
          for (let i = 1; i < mine.length; i++) {
            assert.ok(mine[i]!.at - mine[i - 1]!.at >= LOG_INTERVAL_MS);
          }
          const count = mine.reduce((sum, { line }) => {
            const n = /happened (\d+) times/.exec(line)?.[1];
            return sum + (n === undefined ? 1 : Number(n)); // or "once more"
          }, 0);
          assert.equal(count, events.filter((e) => e.type === kind).length);
        }
        assert.equal(clock.pending, 0, "no timer left behind");
      },
    ),
    { numRuns: 100 },
  );
});

Deno.test("subscribe(): a RedisStore's listener hears each undo once however often it is added, beside onEvent; through a FailoverStore too; a non-function is a TypeError", async () => {
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
  const own: StoreReport[] = [];
  const heard: StoreReport[] = [];
  const onEvent = (event: StoreReport) => void own.push(event);
  const redis = new RedisStore({ client, onEvent });
  const listener = (event: StoreReport) => void heard.push(event);
  redis.subscribe(listener);
  redis.subscribe(listener);
  redis.subscribe(onEvent); // already its onEvent: not told twice
  const options = { fingerprint: "f", leaseMs: 60_000, ttlMs: 60_000 };
  failNext = 1;
  await assert.rejects(() => redis.claim("s1", options), StoreError);
  await waitFor("the undo", () => heard.length === 1 && own.length === 1);
  assert.deepEqual(heard, [{ type: "undo", slot: "s1", outcome: "applied" }]);
  assert.deepEqual(own, heard);

  // A FailoverStore's subscriber hears its primary's undos and its own events.
  const { store: inner } = memoryPair();
  const failover = new FailoverStore({ primary: redis, fallback: inner });
  const through: StoreReport["type"][] = [];
  failover.subscribe((event) => void through.push(event.type));
  failNext = 1;
  const claim = await failover.claim("s2", options); // the primary throws
  assert.equal(claim.state, "acquired");
  await waitFor("the undo", () => through.includes("undo"));
  assert.deepEqual(through.sort(), ["fallback", "undo"]);
  for (const bad of [undefined, "log", {}]) {
    assert.throws(
      () => redis.subscribe(bad as never),
      /'listener' must be a function/,
    );
    assert.throws(
      () => failover.subscribe(bad as never),
      /'listener' must be a function/,
    );
  }
});

/** The console, stubbed by the tests that read the default log. */
const terminal = globalThis.console;

/** Runs `fn` with console.warn, .info and .error kept (as `level line`). */
async function onConsole<T>(
  fn: (kept: string[]) => Promise<T>,
): Promise<{ result: T; kept: string[] }> {
  const kept: string[] = [];
  const { warn, info, error } = terminal;
  for (const level of ["warn", "info", "error"] as const) {
    terminal[level] = (...data: unknown[]) =>
      void kept.push(`${level} ${data.join(" ")}`);
  }
  try {
    return { result: await fn(kept), kept };
  } finally {
    Object.assign(terminal, { warn, info, error });
  }
}

integrationTest(
  "with onEvent given (metrics), a RedisStore on a node-redis client never connected still logs once, at the first 503, that it must be connected",
  REDIS_IGNORE,
  async () => {
    const client = createClient({ url: REDIS_URL });
    client.on("error", () => {});
    const seen: IdempotencyEvent["type"][] = [];
    const { result: statuses, kept } = await onConsole(async (kept) => {
      const handler = idempotency(created, {
        scope: "global",
        store: new RedisStore({ client }),
        onEvent: (event) => void seen.push(event.type),
      });
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await handler(post(`k${i}`));
        await res.body?.cancel();
        statuses.push(res.status);
        if (i === 0) assert.equal(kept.length, 1, "the first, at once");
      }
      return statuses;
    });
    assert.deepEqual(statuses, [503, 503, 503]);
    assert.equal(kept.length, 1, "once: the next line waits for its minute");
    assert.match(
      kept[0]!,
      /^error \[@idempotent\/http\] store_error: the store's claim failed .*the Redis client is not connected .*call `await client\.connect\(\)` before serving/,
    );
    assert.deepEqual(seen.slice(0, 2), ["store_error", "unavailable"]);
  },
);

integrationTest(
  "a Redis outage under the README's FailoverStore snippet, default options: the first request served through PostgreSQL has a fallback line; the retry once Redis is back, a recovered line",
  (await redisServerIgnore()) || POSTGRES_IGNORE,
  async () => {
    await using server = await startRedisServer();
    await using pg = await postgresSchema("logs_failover");
    // examples/failover.ts, but its table in a schema of the test's own.
    const redis = createClient({ url: server.url, disableOfflineQueue: true });
    redis.on("error", () => {}); // reconnects on its own; claims fall back meanwhile
    await redis.connect();
    try {
      const sql = pg.sql;
      const table = `${pg.schema}.idempotency_keys`;
      const store = new FailoverStore({
        primary: new RedisStore({ client: redis, timeoutMs: 250 }),
        fallback: new PostgresStore({ sql, table }),
      });
      await store.migrate();
      let runs = 0;
      const { kept } = await onConsole(async (kept) => {
        const inHandler: string[][] = [];
        const handler = idempotency(() => {
          runs++;
          inHandler.push([...kept]);
          return created();
        }, { store, scope: () => "alice" });
        const healthy = await handler(post("before"));
        assert.equal(healthy.status, 201);
        await healthy.body?.cancel();
        assert.deepEqual(kept, [], "nothing while Redis answers");

        await server.kill();
        await waitFor("the client to notice", () => !redis.isReady);
        const first = await handler(post("during"));
        assert.equal(first.status, 201);
        await first.body?.cancel();
        assert.equal(inHandler[1]!.length, 1, "logged before the handler ran");
        assert.match(
          inHandler[1]![0]!,
          /^warn \[@idempotent\/http\] fallback: the FailoverStore's primary store failed a claim, so claims go to the fallback store alone .*: StoreError: Redis claim failed: The client is offline/,
        );

        await server.restart();
        await waitFor("the client to reconnect", () => redis.isReady);
        const retry = await handler(post("during"));
        assert.equal(retry.headers.get("idempotent-replayed"), "true");
        await retry.body?.cancel();
      });
      assert.equal(runs, 2);
      assert.deepEqual(kept.map((l) => l.split(":")[0]), [
        "warn [@idempotent/http] fallback",
        "info [@idempotent/http] recovered",
      ]);
      assert.match(kept[1]!, /\(copied into the primary\)$/);
    } finally {
      redis.destroy();
    }
  },
);
