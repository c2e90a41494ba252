// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The client (`@idempotent/http/client`) against the real middleware over
 * real HTTP (`Deno.serve` on port 0): a response lost after the handler ran,
 * a 409 while the first attempt runs, a 503 while Redis is down, what is
 * never retried, its timeout and the caller's abort. Request bodies are in
 * `client_bodies_test.ts`, keys and options in `client_options_test.ts`,
 * when it retries, waits and stops (on fake time) in `client_retry_test.ts`.
 * Waits go through an injected `sleep` (no test waits for a real duration
 * or asserts one).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createClient } from "redis";
import {
  createIdempotentFetch,
  IdempotentFetchError,
  type RetryInfo,
} from "../../src/client/client.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { deferred } from "../_support/time.ts";
import {
  REDIS_IGNORE,
  startRedisServer,
  testName,
  uniquePrefix,
  waitFor,
} from "../_support/services.ts";
import { droppingFront, recordingSleep, serve } from "./_client_fixtures.ts";

const json = (body: unknown) => JSON.stringify(body);

Deno.test("createIdempotentFetch() retries a response lost after the handler ran with the same key and gets the replay", async () => {
  let runs = 0;
  const keys: string[] = [];
  await using server = serve((req) => {
    runs++;
    keys.push(req.headers.get("idempotency-key") ?? "");
    return Response.json({ id: `pay_${runs}` }, { status: 201 });
  });
  await using front = droppingFront(server.port, 1);
  const { waits, sleep } = recordingSleep();
  const retries: RetryInfo[] = [];
  const send = createIdempotentFetch({
    sleep,
    random: () => 0.5,
    onRetry: (r) => retries.push(r),
  });
  const result = await send(`http://127.0.0.1:${front.port}/payments`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: json({ amount: 1999 }),
  });
  assert.equal(front.dropped(), 1);
  assert.equal(result.response.status, 201);
  assert.deepEqual(await result.response.json(), { id: "pay_1" });
  assert.equal(result.attempts, 2);
  assert.equal(result.replayed, true);
  assert.equal(result.stopped, null);
  assert.equal(runs, 1, "the handler ran once");
  assert.match(result.key!, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-/);
  assert.deepEqual(keys, [result.key]);
  assert.equal(retries.length, 1);
  assert.equal(retries[0]!.status, null);
  assert.ok(retries[0]!.error !== undefined);
  assert.deepEqual(waits, [250]); // full jitter: 0.5 × 500
});

Deno.test("createIdempotentFetch() waits out a 409 (Retry-After) while the first attempt runs, then gets its replay", async () => {
  const gate = deferred();
  const started = deferred();
  let runs = 0;
  await using server = serve(async () => {
    runs++;
    started.resolve();
    await gate.promise;
    return Response.json({ id: "pay_1" }, { status: 201 });
  });
  const url = `${server.url}/payments`;
  const first = fetch(url, {
    method: "POST",
    headers: { "idempotency-key": "in-flight-1" },
    body: "{}",
  });
  await started.promise;
  const { waits, sleep } = recordingSleep(async () => {
    gate.resolve();
    await (await first).body?.cancel(); // the first attempt has settled
  });
  const retries: RetryInfo[] = [];
  const send = createIdempotentFetch({
    sleep,
    random: () => 0,
    onRetry: (r) => retries.push(r),
    timeout: 45_000, // a failure, should it never get its answer
  });
  const result = await send(url, {
    method: "POST",
    body: "{}",
    idempotencyKey: "in-flight-1",
  }).finally(() => gate.resolve());
  assert.equal(result.response.status, 201);
  assert.deepEqual(await result.response.json(), { id: "pay_1" });
  assert.equal(result.attempts, 2);
  assert.equal(result.replayed, true);
  assert.equal(result.key, "in-flight-1");
  assert.equal(runs, 1);
  assert.equal(retries[0]!.status, 409);
  const hint = retries[0]!.retryAfter;
  assert.ok(hint !== null && hint >= 1000, "the 409 carried Retry-After");
  assert.deepEqual(waits, [hint], "it waited exactly what the server asked");
});

Deno.test({
  name: testName(
    "createIdempotentFetch() retries the 503 of a Redis that is down until it is back, and the handler runs once",
    REDIS_IGNORE,
  ),
  ignore: REDIS_IGNORE !== false,
  async fn() {
    const redis = await startRedisServer();
    const client = createClient({
      url: redis.url,
      socket: { reconnectStrategy: () => 20 },
    });
    client.on("error", () => {});
    await client.connect();
    try {
      let runs = 0;
      await using server = serve(() => {
        runs++;
        return Response.json({ ok: true }, { status: 201 });
      }, {
        store: new RedisStore({
          client,
          prefix: `${uniquePrefix("client")}:`,
          timeoutMs: 300,
        }),
      });
      await redis.kill();
      const statuses: (number | null)[] = [];
      const send = createIdempotentFetch({
        maxAttempts: 10,
        onRetry: (r) => statuses.push(r.status),
        sleep: async () => {
          if (statuses.length !== 1) return;
          await redis.restart();
          await waitFor("the client to reconnect", () => client.isReady);
        },
      });
      const result = await send(`${server.url}/payments`, {
        method: "POST",
        body: "{}",
      });
      assert.equal(result.response.status, 201);
      await result.response.body?.cancel();
      assert.equal(statuses[0], 503);
      assert.equal(runs, 1);
      assert.equal(result.replayed, false);
    } finally {
      client.destroy();
      await redis.stop();
    }
  },
});

Deno.test("createIdempotentFetch() never retries a 422 (key reused for another request) and says why", async () => {
  let runs = 0;
  await using server = serve(() => {
    runs++;
    return new Response("created", { status: 201 });
  });
  const send = createIdempotentFetch({
    sleep: () => Promise.reject(new Error("must not wait")),
  });
  const url = `${server.url}/payments`;
  const first = await send(url, { method: "POST", body: '{"amount":1}' });
  await first.response.body?.cancel();
  const other = await send(url, {
    method: "POST",
    body: '{"amount":2}',
    idempotencyKey: first.key!,
  });
  assert.equal(other.response.status, 422);
  assert.equal(other.attempts, 1);
  assert.equal(other.key, first.key);
  assert.equal(other.stopped?.reason, "not_retryable");
  assert.match(other.stopped!.message, /^Not retried: 422 .*another request/);
  assert.equal(
    (await other.response.json()).type,
    "https://jsr.io/@idempotent/http#problem-key-reused",
  );
  assert.equal(runs, 1);
});

Deno.test("createIdempotentFetch() never retries a 400 nor a 5xx outside retryStatuses", async () => {
  let runs = 0;
  let status = 400;
  await using server = serve(() => {
    runs++;
    return new Response("no", { status });
  });
  const send = createIdempotentFetch({
    sleep: () => Promise.reject(new Error("must not wait")),
  });
  for (const s of [400, 404, 501]) {
    status = s;
    runs = 0;
    const result = await send(`${server.url}/payments`, {
      method: "POST",
      body: "{}",
    });
    assert.equal(result.response.status, s);
    await result.response.body?.cancel();
    assert.equal(result.attempts, 1);
    assert.equal(result.stopped?.reason, "not_retryable");
    assert.match(result.stopped!.message, new RegExp(`^Not retried: ${s} `));
    assert.equal(runs, 1);
  }
});

Deno.test("createIdempotentFetch() makes at most maxAttempts attempts, with capped exponential backoff and full jitter", async () => {
  let runs = 0;
  await using server = serve(() => {
    runs++;
    return new Response("down", { status: 502 });
  });
  const { waits, sleep } = recordingSleep();
  const send = createIdempotentFetch({
    maxAttempts: 5,
    baseDelay: 100,
    maxDelay: 500,
    random: () => 0.999,
    sleep,
  });
  const result = await send(`${server.url}/payments`, {
    method: "POST",
    body: "{}",
  });
  assert.equal(result.response.status, 502);
  await result.response.body?.cancel();
  assert.equal(result.attempts, 5);
  assert.equal(runs, 5); // a 502 is released by the middleware: it ran again
  assert.equal(result.stopped?.reason, "attempts");
  assert.deepEqual(waits, [99, 199, 399, 499]);
});

Deno.test("createIdempotentFetch() stops at its timeout: before a wait that would pass it, and during an attempt", async () => {
  // Waits on an injected clock: 503s with Retry-After: 20 (seconds).
  let now = 1_000_000;
  let runs = 0;
  await using server = serve(() => {
    runs++;
    return new Response(null, {
      status: 503,
      headers: { "retry-after": "20" },
    });
  });
  const send = createIdempotentFetch({
    timeout: 50_000,
    clock: () => now,
    sleep: (ms) => Promise.resolve(void (now += ms)),
    random: () => 0,
  });
  const result = await send(`${server.url}/payments`, {
    method: "POST",
    body: "{}",
  });
  assert.equal(result.response.status, 503);
  assert.equal(result.attempts, 3); // at 0 s, 20 s, 40 s; 60 s is past 50 s
  assert.equal(result.stopped?.reason, "deadline");
  assert.equal(runs, 3);

  // A handler that never answers: the attempt in flight is aborted.
  const hang = deferred();
  const seen: Request[] = [];
  await using stuck = serve(async () => {
    await hang.promise;
    return new Response("late");
  });
  const error = await createIdempotentFetch({
    timeout: 100,
    fetch: (request) => {
      seen.push(request);
      return fetch(request);
    },
  })(`${stuck.url}/payments`, { method: "POST", body: "{}" }).catch((e) => e);
  hang.resolve();
  assert.ok(error instanceof IdempotentFetchError);
  assert.equal(error.reason, "deadline");
  assert.equal(error.attempts, 1);
  assert.ok(error.key !== null);
  assert.equal(seen[0]!.signal.aborted, true);
});

Deno.test("createIdempotentFetch() stops when the caller aborts: the attempt in flight, and a wait", async () => {
  const started = deferred();
  const hang = deferred();
  await using server = serve(async () => {
    started.resolve();
    await hang.promise;
    return new Response("late");
  });
  const seen: Request[] = [];
  const controller = new AbortController();
  const pending = createIdempotentFetch({
    fetch: (request) => {
      seen.push(request);
      return fetch(request);
    },
  })(`${server.url}/payments`, {
    method: "POST",
    body: "{}",
    idempotencyKey: "abort-1",
    signal: controller.signal,
  }).catch((e) => e);
  await started.promise;
  controller.abort(new Error("user left"));
  const error = await pending;
  hang.resolve();
  assert.ok(error instanceof IdempotentFetchError);
  assert.equal(error.reason, "aborted");
  assert.equal(error.key, "abort-1");
  assert.equal((error.cause as Error).message, "user left");
  assert.equal(seen[0]!.signal.aborted, true, "the fetch in flight stopped");

  // Aborted while waiting: a sleep that never ends does not hold it.
  const waiting = new AbortController();
  const sleeping = deferred();
  const pendingWait = createIdempotentFetch({
    fetch: () => new Response(null, { status: 503 }),
    sleep: () => {
      sleeping.resolve();
      return new Promise<void>(() => {});
    },
  })("http://api.test/payments", {
    method: "POST",
    signal: waiting.signal,
  }).catch((e) => e);
  await sleeping.promise;
  waiting.abort();
  const waitError = await pendingWait;
  assert.ok(waitError instanceof IdempotentFetchError);
  assert.equal(waitError.reason, "aborted");
  assert.equal(waitError.attempts, 1);
});
