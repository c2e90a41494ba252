// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Each misconfiguration of issue 23 says what is wrong and what to do: with
 * default options, one log line (at most one a minute, then a count) for
 * what only a request can find (a Redis client never connected, a table
 * never migrated, a closed Deno.Kv), and a throw at construction for the
 * rest (a pool too small for transactions, a misspelt option, an option
 * with no effect, a duration without its unit). Also: the stores' `onEvent`
 * undo reports. The log itself is tested in `logging_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { Redis } from "ioredis";
import postgres from "postgres";
import {
  idempotency,
  type IdempotencyOptions,
  MemoryStore,
  parseIdempotencyKey,
} from "../mod.ts";
import { createIdempotentFetch } from "../src/client/client.ts";
import { idempotent } from "../src/hono.ts";
import { StoreError, type StoreEvent } from "../src/store.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { KvStore } from "../src/stores/kv.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { type RedisCommander, RedisStore } from "../src/stores/redis.ts";
import { Orphans } from "../src/stores/_orphans.ts";
import { idempotencyOn } from "./_support/idempotency.ts";
import { post } from "./_support/http.ts";
import {
  DATABASE_URL,
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  redisServerIgnore,
  startRedisServer,
} from "./_support/services.ts";
import { FakeClock, waitFor } from "./_support/time.ts";

/** The log's documented minute: a kind's later lines are counted for it. */
const LOG_INTERVAL_MS = 60_000;

/** The console, stubbed by the tests that read the default log. */
const terminal = globalThis.console;

const ok = () => new Response("ok", { status: 201 });

/**
 * Sends `count` keyed requests to a handler on `store` with default options
 * (console stubbed), then moves the log's clock a minute on; returns each
 * request's status and every `console.error` line.
 */
async function defaultLog(
  store: IdempotencyOptions["store"],
  count: number,
): Promise<{ statuses: number[]; lines: string[]; clock: FakeClock }> {
  const clock = new FakeClock();
  const lines: string[] = [];
  const original = terminal.error;
  terminal.error = (...data: unknown[]) => void lines.push(data.join(" "));
  const statuses: number[] = [];
  try {
    const handler = idempotencyOn(clock, ok, {
      scope: "global",
      ...(store ? { store } : {}),
    });
    for (let i = 0; i < count; i++) {
      const res = await handler(post(`k${i}-${crypto.randomUUID()}`));
      await res.body?.cancel();
      statuses.push(res.status);
      if (i === 0) assert.equal(lines.length, 1, "the first, at once");
    }
    assert.equal(lines.length, 1, "no second line within the minute");
    await clock.advance(LOG_INTERVAL_MS);
  } finally {
    terminal.error = original;
  }
  return { statuses, lines, clock };
}

integrationTest(
  "a RedisStore on a node-redis client never connected logs, at once and once a minute, that it must be connected",
  REDIS_IGNORE,
  async () => {
    const client = createClient({ url: REDIS_URL });
    client.on("error", () => {});
    const { statuses, lines } = await defaultLog(new RedisStore({ client }), 3);
    assert.deepEqual(statuses, [503, 503, 503]);
    assert.equal(lines.length, 2);
    assert.match(
      lines[0]!,
      /store_error: the store's claim failed .*Redis claim failed: The client is closed: the Redis client is not connected .*call `await client\.connect\(\)` before serving/,
    );
    assert.match(lines[1]!, /store_error happened 2 times in the last minute/);
  },
);

integrationTest(
  "a RedisStore on an ioredis client with lazyConnect and no offline queue, not connected, says to connect it; one closed says so",
  REDIS_IGNORE,
  async () => {
    const lazy = new Redis(REDIS_URL, {
      lazyConnect: true,
      enableOfflineQueue: false,
    });
    lazy.on("error", () => {});
    try {
      const { statuses, lines } = await defaultLog(
        new RedisStore({ client: lazy }),
        2,
      );
      assert.deepEqual(statuses, [503, 503]);
      assert.match(
        lines[0]!,
        /enableOfflineQueue options is false: the Redis client is not connected \(ioredis `lazyConnect`\): call `await client\.connect\(\)` before serving/,
      );
    } finally {
      lazy.disconnect();
    }
    const closed = new Redis(REDIS_URL);
    closed.on("error", () => {});
    await closed.quit();
    await waitFor("ioredis to end", () => closed.status === "end");
    const store = new RedisStore({ client: closed });
    const options = { fingerprint: "f", leaseMs: 1_000, ttlMs: 1_000 };
    await assert.rejects(
      () => store.claim("s", options),
      /Redis claim failed: .*the Redis client was closed \(`quit\(\)` or `disconnect\(\)`\): close it only after the server stops/,
    );
  },
);

integrationTest(
  "a PostgresStore on a table never migrated logs that migrate() must run",
  POSTGRES_IGNORE,
  async () => {
    await using schema = await postgresSchema("loud_unmigrated");
    const table = `${schema.schema}.never_migrated`;
    const store = new PostgresStore({ sql: schema.sql, table });
    const { statuses, lines } = await defaultLog(store, 2);
    assert.deepEqual(statuses, [503, 503]);
    assert.match(
      lines[0]!,
      /PostgreSQL claim failed: relation .* does not exist: run `await store\.migrate\(\)` .* on ".*never_migrated" before serving/,
    );
    assert.match(lines[1]!, /store_error happened once more/);
    await store.migrate();
    const handler = idempotency(ok, { scope: "global", store });
    assert.equal((await handler(post("after"))).status, 201);
  },
);

Deno.test("PostgresStore.transactional() on postgres(url, { max: 1 }) throws at once, naming max", async () => {
  const sql = postgres(DATABASE_URL, { max: 1 }); // connects on first query
  try {
    const store = new PostgresStore({ sql });
    assert.throws(
      () => store.transactional(ok),
      /^RangeError: A transaction needs a pool of at least 2 connections .*`postgres\(url, \{ max: 2 \}\)` or more: 'max' is 1$/,
    );
  } finally {
    await sql.end();
  }
});

Deno.test("a KvStore on a closed Deno.Kv says it is closed", async () => {
  const kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  kv.close();
  const options = { fingerprint: "f", leaseMs: 1_000, ttlMs: 1_000 };
  await assert.rejects(
    () => store.claim("s", options),
    (error: Error) => {
      assert.ok(error instanceof StoreError);
      assert.match(
        error.message,
        /the Deno\.Kv is closed: keep it open while the store is in use/,
      );
      return true;
    },
  );
});

Deno.test("every constructor refuses a misspelt option, naming the nearest one", async () => {
  const client: RedisCommander = { sendCommand: () => Promise.resolve(null) };
  const sql = postgres(DATABASE_URL, { max: 2 });
  await using kv = await Deno.openKv(":memory:");
  const store = new MemoryStore();
  const cases: [() => unknown, RegExp][] = [
    [
      () => idempotency(ok, { scope: "global", leaseMs: 5 } as never),
      /^TypeError: idempotency\(\) has no option 'leaseMs': did you mean 'lease'\?$/,
    ],
    [
      () => idempotent({ scope: "global", ttlMs: 5 } as never),
      /idempotency\(\) has no option 'ttlMs': did you mean 'ttl'\?/,
    ],
    [
      () => new MemoryStore({ maxEntry: 5 } as never),
      /^TypeError: MemoryStore has no option 'maxEntry': did you mean 'maxEntries'\?$/,
    ],
    [
      () => new KvStore({ kv, timeout: 5 } as never),
      /KvStore has no option 'timeout': did you mean 'timeoutMs'\?/,
    ],
    [
      () => new RedisStore({ client, prefx: "a:" } as never),
      /RedisStore has no option 'prefx': did you mean 'prefix'\?/,
    ],
    [
      () => new PostgresStore({ sql, tabel: "t" } as never),
      /PostgresStore has no option 'tabel': did you mean 'table'\?/,
    ],
    [
      () =>
        new PostgresStore({
          sql,
          transaction: { isolationLevel: "serializable" },
        } as never),
      /PostgresStore 'transaction' has no option 'isolationLevel': did you mean 'isolation'\?/,
    ],
    [
      () =>
        new FailoverStore({
          primary: store,
          fallback: new MemoryStore(),
          strcit: true,
        } as never),
      /FailoverStore has no option 'strcit': did you mean 'strict'\?/,
    ],
    [
      () => createIdempotentFetch({ maxAttempt: 2 } as never),
      /createIdempotentFetch\(\) has no option 'maxAttempt': did you mean 'maxAttempts'\?/,
    ],
    [
      () => new MemoryStore({ zzzzzzzz: 1 } as never),
      /MemoryStore has no option 'zzzzzzzz': its options are 'maxEntries', 'maxBytes', 'clock'$/,
    ],
  ];
  try {
    for (const [make, message] of cases) {
      assert.throws(make, (error: Error) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.match(String(error), message);
        return true;
      });
    }
  } finally {
    await sql.end();
  }
});

Deno.test("an option with no effect is a TypeError: maxWaiting without waitForInFlight, waitTimeoutMs without waitReplicas, retry options with maxAttempts 1", () => {
  const client: RedisCommander = { sendCommand: () => Promise.resolve(null) };
  assert.throws(
    () => idempotency(ok, { scope: "global", maxWaiting: 10 }),
    /^TypeError: 'maxWaiting' has no effect without 'waitForInFlight' above 0: set that too, or drop 'maxWaiting'$/,
  );
  idempotency(ok, { scope: "global", maxWaiting: 10, waitForInFlight: 1 });
  assert.throws(
    () => new RedisStore({ client, waitTimeoutMs: 100 }),
    /^TypeError: 'waitTimeoutMs' has no effect without 'waitReplicas' above 0/,
  );
  new RedisStore({ client, waitTimeoutMs: 100, waitReplicas: 1 });
  for (const name of ["baseDelay", "maxDelay", "maxRetryAfter"]) {
    assert.throws(
      () => createIdempotentFetch({ maxAttempts: 1, [name]: 10 }),
      new RegExp(`'${name}' has no effect without 'maxAttempts' above 1`),
    );
  }
  assert.throws(
    () => createIdempotentFetch({ maxAttempts: 1, onRetry: () => {} }),
    TypeError,
  );
  createIdempotentFetch({ maxAttempts: 2, baseDelay: 10 });
});

Deno.test("a duration error names milliseconds, and quotes a string", () => {
  const client: RedisCommander = { sendCommand: () => Promise.resolve(null) };
  const cases: [() => unknown, RegExp][] = [
    [
      () => idempotency(ok, { scope: "global", ttl: "24h" as never }),
      /^RangeError: 'ttl' must be a positive integer of milliseconds: current value is "24h"$/,
    ],
    [
      () => new RedisStore({ client, timeoutMs: 0 }),
      /'timeoutMs' must be a positive integer of milliseconds, or Infinity: current value is 0/,
    ],
    [
      () => createIdempotentFetch({ timeout: 1.5 }),
      /'timeout' must be a positive integer of milliseconds: current value is 1.5/,
    ],
  ];
  for (const [make, message] of cases) assert.throws(make, message);
});

Deno.test("a bare key with a space is refused as a space, with how to send one", () => {
  const parsed = parseIdempotencyKey("order 42");
  assert.equal(parsed.ok, false);
  assert.match(
    !parsed.ok ? parsed.reason : "",
    /^the key has a space at position 6: quote the key \("a b"\) to hold one; a bare key is visible ASCII \(0x21–0x7E\) but a comma$/,
  );
  assert.deepEqual(parseIdempotencyKey('"order 42"'), {
    ok: true,
    key: "order 42",
  });
});

Deno.test("Orphans tells onEvent how each undo ended: applied, lost, dropped past its lease or past max; a throw is ignored", async () => {
  const answers: ("applied" | "lost")[] = ["applied", "lost"];
  const orphans = new Orphans(() => Promise.resolve(answers.shift()!), 2);
  const events: StoreEvent[] = [];
  orphans.onEvent = (event) => {
    events.push(event);
    throw new Error("a listener's throw");
  };
  orphans.undo("a", "t", 60_000);
  orphans.undo("b", "t", 60_000);
  await waitFor("both releases", () => events.length === 2);
  assert.deepEqual(events, [
    { type: "undo", slot: "a", outcome: "applied" },
    { type: "undo", slot: "b", outcome: "lost" },
  ]);
  // Past max: the oldest watched one is dropped.
  orphans.watch("c", "t", 60_000);
  orphans.watch("d", "t", 60_000);
  orphans.watch("e", "t", 60_000);
  assert.deepEqual(events.at(-1), {
    type: "undo",
    slot: "c",
    outcome: "dropped",
  });
  // Its lease passed before its release was sent.
  const late = orphans.watch("f", "t", -1);
  orphans.cameBack(late, "t");
  await waitFor("the late one", () => events.length === 5);
  assert.deepEqual(events.at(-1), {
    type: "undo",
    slot: "f",
    outcome: "dropped",
  });
});

Deno.test("RedisStore reports the undo of a claim that failed but may have landed to its onEvent", async () => {
  const events: StoreEvent[] = [];
  let first = true;
  const client: RedisCommander = {
    sendCommand(args) {
      if (args[0] === "SET" && first) {
        first = false;
        return Promise.reject(new Error("Socket closed unexpectedly"));
      }
      return Promise.resolve(1); // the release script: applied
    },
  };
  const store = new RedisStore({
    client,
    onEvent: (event) => void events.push(event),
  });
  const options = { fingerprint: "f", leaseMs: 60_000, ttlMs: 60_000 };
  await assert.rejects(() => store.claim("s1", options), StoreError);
  await waitFor("the undo", () => events.length === 1);
  assert.deepEqual(events, [{ type: "undo", slot: "s1", outcome: "applied" }]);
  assert.throws(
    () => new RedisStore({ client, onEvent: "yes" as never }),
    /'onEvent' must be a function/,
  );
});

integrationTest(
  "a RedisStore on an ioredis client with lazyConnect that was connected, reconnecting, is not told to connect it",
  await redisServerIgnore(),
  async () => {
    await using server = await startRedisServer();
    const client = new Redis(server.url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    });
    client.on("error", () => {});
    try {
      const store = new RedisStore({ client, timeoutMs: 1_000 }); // "wait"
      await client.connect();
      const options = { fingerprint: "f", leaseMs: 1_000, ttlMs: 1_000 };
      assert.equal((await store.claim("a", options)).state, "acquired");
      // Paused, the server's kernel still accepts: a reconnect stays "connect".
      server.pause();
      client.disconnect(true);
      await waitFor("ioredis to reconnect", () => client.status === "connect");
      const error = await store.claim("b", options).then(
        () => assert.fail("a claim on a dead server succeeded"),
        (error: unknown) => error,
      );
      assert.ok(error instanceof StoreError);
      assert.doesNotMatch(error.message, /lazyConnect|client\.connect\(\)/);
    } finally {
      client.disconnect();
    }
  },
);
