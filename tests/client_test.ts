// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The client (`@idempotent/http/client`) against the real middleware over
 * real HTTP (`Deno.serve` on port 0): a response lost after the handler ran,
 * a 409 while the first attempt runs, a 503 while Redis is down, and what is
 * never retried. Waits go through an injected `sleep` (no test waits for a
 * real duration or asserts one).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency, type IdempotencyOptions } from "../mod.ts";
import {
  createIdempotentFetch,
  IdempotentFetchError,
  type IdempotentFetchOptions,
  type RetryInfo,
} from "../src/client.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { deferred } from "./_support/time.ts";
import { frames, pattern, sameBytes } from "./_support/bytes.ts";
import {
  REDIS_IGNORE,
  startRedisServer,
  testName,
  uniquePrefix,
  waitFor,
} from "./_support/services.ts";

function serve(
  handler: (req: Request) => Response | Promise<Response>,
  options: Partial<IdempotencyOptions> = {},
) {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    idempotency(handler, { scope: "global", ...options }),
  );
  const { port } = server.addr as Deno.NetAddr;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

/**
 * A TCP front on loopback that forwards each connection to `targetPort`.
 * For the first `drops` connections it forwards the request, waits for the
 * first bytes of the response (the handler ran, the answer is on its way)
 * and then closes the client's connection without sending them: the case a
 * client cannot tell from a lost request.
 */
function droppingFront(targetPort: number, drops: number) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let left = drops;
  let dropped = 0;
  const close = (conn: Deno.Conn) => {
    open.delete(conn);
    try {
      conn.close();
    } catch { /* closed already */ }
  };
  const accepting = (async () => {
    for await (const client of listener) {
      open.add(client);
      const upstream = await Deno.connect({
        hostname: "127.0.0.1",
        port: targetPort,
      });
      open.add(upstream);
      const drop = left-- > 0;
      client.readable.pipeTo(upstream.writable).catch(() => {});
      if (!drop) {
        upstream.readable.pipeTo(client.writable).catch(() => {});
        continue;
      }
      const reader = upstream.readable.getReader();
      reader.read().then(() => {
        dropped++;
        reader.releaseLock();
        close(client);
        close(upstream);
      }, () => {});
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    dropped: () => dropped,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const conn of [...open]) close(conn);
      await accepting;
    },
  };
}

/** An injected sleep that records each wait and runs `then` (once per wait). */
function recordingSleep(then: (ms: number) => unknown = () => {}) {
  const waits: number[] = [];
  return {
    waits,
    sleep: async (ms: number) => {
      waits.push(ms);
      await then(ms);
    },
  };
}

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

Deno.test("createIdempotentFetch() buffers a stream body once and sends it again byte for byte", async () => {
  const body = pattern(300_000, 7);
  const received: Uint8Array[] = [];
  await using server = serve(async (req) => {
    received.push(new Uint8Array(await req.arrayBuffer()));
    return new Response("stored", { status: 201 });
  });
  await using front = droppingFront(server.port, 1);
  const parts = [body.slice(0, 1), body.slice(1, 65_537), body.slice(65_537)];
  const send = createIdempotentFetch({ sleep: () => Promise.resolve() });
  const result = await send(`http://127.0.0.1:${front.port}/uploads`, {
    method: "POST",
    body: frames(parts),
    duplex: "half",
  } as RequestInit);
  assert.equal(result.response.status, 201);
  assert.equal(await result.response.text(), "stored");
  assert.equal(result.attempts, 2);
  assert.equal(result.replayed, true); // same bytes: same fingerprint
  assert.equal(received.length, 1);
  assert.ok(sameBytes(received[0]!, body));
});

Deno.test("createIdempotentFetch() refuses a stream body over maxBodyBytes before sending anything", async () => {
  let calls = 0;
  let cancelled = false;
  const send = createIdempotentFetch({
    maxBodyBytes: 10,
    fetch: () => {
      calls++;
      return new Response("no");
    },
  });
  const error = await send("http://api.test/uploads", {
    method: "POST",
    body: frames([pattern(6), pattern(5), pattern(100)], {
      onCancel: () => cancelled = true,
    }),
    idempotencyKey: "big-1",
  }).catch((e) => e);
  assert.ok(error instanceof IdempotentFetchError);
  assert.equal(error.reason, "body_too_large");
  assert.equal(error.key, "big-1");
  assert.equal(error.attempts, 0);
  assert.match(error.message, /'maxBodyBytes' \(10 bytes\)/);
  assert.equal(calls, 0);
  assert.equal(cancelled, true);
});

Deno.test("createIdempotentFetch() sends a FormData again with the same boundary (no 422 on the retry)", async () => {
  let runs = 0;
  await using server = serve(async (req) => {
    runs++;
    const form = await req.formData();
    return Response.json({ name: form.get("name") }, { status: 201 });
  });
  await using front = droppingFront(server.port, 1);
  const form = new FormData();
  form.set("name", "Ada");
  form.set("file", new Blob([pattern(1000)]), "a.bin");
  const result = await createIdempotentFetch({
    sleep: () => Promise.resolve(),
  })(`http://127.0.0.1:${front.port}/forms`, { method: "POST", body: form });
  assert.equal(result.response.status, 201);
  assert.deepEqual(await result.response.json(), { name: "Ada" });
  assert.equal(result.replayed, true);
  assert.equal(runs, 1);
});

Deno.test("createIdempotentFetch() honours a Retry-After date, and hands back a wait over maxRetryAfter", async () => {
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);
  let answers = [
    new Response(null, {
      status: 429,
      headers: { "retry-after": new Date(now + 3000).toUTCString() },
    }),
    new Response("ok"),
  ];
  const { waits, sleep } = recordingSleep();
  const options: IdempotentFetchOptions = {
    clock: () => now,
    random: () => 0,
    sleep,
    fetch: () => answers.shift()!,
  };
  const result = await createIdempotentFetch(options)("http://api.test/x", {
    method: "POST",
  });
  assert.equal(result.response.status, 200);
  assert.deepEqual(waits, [3000]);

  answers = [
    new Response(null, { status: 503, headers: { "retry-after": "120" } }),
  ];
  const long = await createIdempotentFetch(options)("http://api.test/x", {
    method: "POST",
  });
  assert.equal(long.response.status, 503);
  assert.equal(long.stopped?.reason, "retry_after");
  assert.equal(waits.length, 1);
});

Deno.test("createIdempotentFetch() keys POST and PATCH only: GET is retried without a key, an unkeyed POST is sent once", async () => {
  const sent: Request[] = [];
  const send = createIdempotentFetch({
    methods: ["PATCH"],
    sleep: () => Promise.resolve(),
    fetch: (request) => {
      sent.push(request);
      return Promise.reject(new TypeError("connection reset"));
    },
  });
  const get = await send("http://api.test/x").catch((e) => e);
  assert.equal(get.reason, "attempts");
  assert.equal(get.key, null);
  assert.equal(sent.length, 5);
  assert.ok(sent.every((r) => !r.headers.has("idempotency-key")));

  sent.length = 0;
  const post = await send("http://api.test/x", { method: "POST", body: "{}" })
    .catch((e) => e);
  assert.equal(post.reason, "not_retryable");
  assert.match(post.message, /POST without an idempotency key/);
  assert.equal(sent.length, 1);

  sent.length = 0;
  const patch = await send("http://api.test/x", { method: "PATCH", body: "{}" })
    .catch((e) => e);
  assert.equal(patch.reason, "attempts");
  assert.equal(
    new Set(sent.map((r) => r.headers.get("idempotency-key"))).size,
    1,
  );
  assert.equal(sent[0]!.headers.get("idempotency-key"), patch.key);
});

Deno.test("createIdempotentFetch() takes the caller's key from the header or idempotencyKey, and refuses a bad or conflicting one", async () => {
  const keys: (string | null)[] = [];
  const send = createIdempotentFetch({
    fetch: (request) => {
      keys.push(request.headers.get("idempotency-key"));
      return new Response("ok");
    },
  });
  const result = await send(
    new Request("http://api.test/x", {
      method: "POST",
      headers: { "Idempotency-Key": "from-header" },
      body: "{}",
    }),
  );
  assert.equal(result.key, "from-header");
  assert.deepEqual(keys, ["from-header"]);
  await assert.rejects(
    () =>
      send("http://api.test/x", {
        method: "POST",
        headers: { "Idempotency-Key": "a" },
        idempotencyKey: "b",
      }),
    /^TypeError: 'idempotencyKey' differs from the request's Idempotency-Key header/,
  );
  await assert.rejects(
    () => send("http://api.test/x", { method: "POST", idempotencyKey: "a,b" }),
    /'idempotencyKey' must be 1 to 255 printable ASCII .*current value is "a,b"/,
  );
});

Deno.test("createIdempotentFetch() checks its options eagerly, naming the option and the value", () => {
  const cases: [IdempotentFetchOptions, ErrorConstructor, RegExp][] = [
    [
      { maxAttempts: 0 },
      RangeError,
      /^'maxAttempts' must be a positive integer: current value is 0$/,
    ],
    [
      { timeout: -1 },
      RangeError,
      /^'timeout' must be a positive integer: current value is -1$/,
    ],
    [{ baseDelay: 1.5 }, RangeError, /'baseDelay' .*1\.5/],
    [{ maxBodyBytes: -1 }, RangeError, /'maxBodyBytes'/],
    [
      { retryStatuses: [404] },
      RangeError,
      /^'retryStatuses' must be a list of 5xx statuses: current value is \[404\]$/,
    ],
    [{ methods: ["PO ST"] }, TypeError, /'methods'/],
    [
      { header: "bad header" },
      TypeError,
      /^'header' must be a header name: current value is "bad header"$/,
    ],
    [
      { sleep: 1 as never },
      TypeError,
      /^'sleep' must be a function: current value is 1$/,
    ],
  ];
  for (const [options, type, message] of cases) {
    assert.throws(() => createIdempotentFetch(options), (e: unknown) => {
      assert.ok(e instanceof type, `${JSON.stringify(options)}`);
      assert.match((e as Error).message, message);
      return true;
    });
  }
});

/**
 * A client on fake time, in process: `answer` gives each attempt's response
 * (or throws, a network error); `sleep` moves the clock on by its wait.
 */
function fakeClient(
  answer: (attempt: number) => Response,
  options: IdempotentFetchOptions = {},
) {
  let now = 1_000_000;
  const waits: number[] = [];
  let calls = 0;
  const send = createIdempotentFetch({
    fetch: () => answer(++calls),
    clock: () => now,
    sleep: (ms) => Promise.resolve(void (waits.push(ms), now += ms)),
    random: () => 0,
    ...options,
  });
  const post = (init: Parameters<typeof send>[1] = {}) =>
    send("http://api.test/payments", { method: "POST", body: "{}", ...init });
  return { post, waits, calls: () => calls };
}

const networkError = () => {
  throw new TypeError("connection reset");
};

Deno.test("createIdempotentFetch() sends nothing for a signal aborted before the call: aborted, 0 attempts", async () => {
  const client = fakeClient(() => new Response("ran"));
  const controller = new AbortController();
  controller.abort(new Error("left already"));
  const error = await client.post({ signal: controller.signal }).catch((e) =>
    e
  );
  assert.ok(error instanceof IdempotentFetchError);
  assert.equal(error.reason, "aborted");
  assert.equal(error.attempts, 0);
  assert.equal((error.cause as Error).message, "left already");
  assert.equal(client.calls(), 0);

  // The caller's own TimeoutError is the caller's abort, not the 'timeout'.
  const timedOut = new AbortController();
  timedOut.abort(new DOMException("caller's", "TimeoutError"));
  const its = await client.post({ signal: timedOut.signal }).catch((e) => e);
  assert.equal(its.reason, "aborted");
  assert.equal(client.calls(), 0);
});

Deno.test("createIdempotentFetch() honours a Retry-After of exactly maxRetryAfter and stops at one second more", async () => {
  for (
    const [seconds, reason, waits] of [
      [4, "attempts", [4_000]],
      [5, "attempts", [5_000]],
      [6, "retry_after", []],
    ] as const
  ) {
    const client = fakeClient(() =>
      new Response(null, {
        status: 503,
        headers: { "retry-after": `${seconds}` },
      }), { maxRetryAfter: 5_000, maxAttempts: 2 });
    const result = await client.post();
    assert.equal(result.stopped?.reason, reason, `Retry-After: ${seconds}`);
    assert.deepEqual(client.waits, waits);
    assert.equal(result.attempts, waits.length + 1);
  }
});

Deno.test("createIdempotentFetch() by default retries through Retry-After: 60 only until its 60 s timeout, and refuses 61", async () => {
  for (const [seconds, reason] of [[60, "deadline"], [61, "retry_after"]]) {
    const client = fakeClient(() =>
      new Response(null, {
        status: 429,
        headers: { "retry-after": `${seconds}` },
      })
    );
    const result = await client.post();
    assert.equal(result.stopped?.reason, reason, `Retry-After: ${seconds}`);
    assert.equal(result.attempts, 1);
  }
});

Deno.test("createIdempotentFetch() retries a network error only when the backoff ends before its timeout", async () => {
  // random 0.999, base and cap 1000: the first wait is 999 ms.
  for (
    const [timeout, reason, attempts] of [
      [998, "deadline", 1],
      [999, "deadline", 1],
      [1_000, "attempts", 2],
    ] as const
  ) {
    const client = fakeClient(networkError, {
      timeout,
      maxAttempts: 2,
      baseDelay: 1_000,
      maxDelay: 1_000,
      random: () => 0.999,
    });
    const error = await client.post().catch((e) => e);
    assert.ok(error instanceof IdempotentFetchError);
    assert.equal(error.reason, reason, `timeout ${timeout}`);
    assert.equal(error.attempts, attempts);
    assert.equal((error.cause as Error).message, "connection reset");
    assert.deepEqual(client.waits, attempts === 2 ? [999] : []);
  }
});

Deno.test("createIdempotentFetch() retries a retryable status only when the backoff ends before its timeout", async () => {
  for (
    const [timeout, reason, attempts] of [
      [999, "deadline", 1],
      [1_000, "attempts", 2],
    ] as const
  ) {
    const client = fakeClient(() => new Response(null, { status: 503 }), {
      timeout,
      maxAttempts: 2,
      baseDelay: 1_000,
      maxDelay: 1_000,
      random: () => 0.999,
    });
    const result = await client.post();
    assert.equal(result.stopped?.reason, reason, `timeout ${timeout}`);
    assert.equal(result.attempts, attempts);
  }
});

Deno.test("createIdempotentFetch() by default makes 5 attempts, waiting 500 ms doubled, capped at 10 s", async () => {
  const client = fakeClient(networkError, { random: () => 0.999 });
  const error = await client.post().catch((e) => e);
  assert.equal(error.reason, "attempts");
  assert.equal(error.attempts, 5);
  assert.deepEqual(client.waits, [499, 999, 1_998, 3_996]);

  const capped = fakeClient(networkError, {
    random: () => 0.999,
    maxAttempts: 7,
    timeout: 600_000,
  });
  await capped.post().catch(() => {});
  assert.deepEqual(capped.waits.slice(4), [7_992, 9_990]);
});

Deno.test("createIdempotentFetch() keeps a stream body of maxBodyBytes and refuses one byte more", async () => {
  for (const [size, sent] of [[9, true], [10, true], [11, false]] as const) {
    const client = fakeClient(() => new Response("ok"), { maxBodyBytes: 10 });
    const outcome = await client.post({ body: frames([pattern(size)]) })
      .then((r) => r.stopped, (e) => e.reason);
    assert.equal(outcome, sent ? null : "body_too_large", `${size} bytes`);
    assert.equal(client.calls(), sent ? 1 : 0);
  }
});

Deno.test("createIdempotentFetch() tells every StopReason from its neighbours", async () => {
  const stopped = async (
    answer: (attempt: number) => Response,
    options: IdempotentFetchOptions = {},
    init: Parameters<ReturnType<typeof fakeClient>["post"]>[0] = {},
  ) => {
    const client = fakeClient(answer, options);
    return await client.post(init).then(
      (r) => [r.stopped?.reason ?? null, r.attempts],
      (e: IdempotentFetchError) => [e.reason, e.attempts],
    );
  };
  const status = (code: number, headers: HeadersInit = {}) => () =>
    new Response(null, { status: code, headers });
  const unkeyed = { methods: [] };
  // A final answer, a keyless POST: not_retryable, never anything else.
  assert.deepEqual(await stopped(status(422)), ["not_retryable", 1]);
  assert.deepEqual(await stopped(status(501)), ["not_retryable", 1]);
  assert.deepEqual(await stopped(status(503), unkeyed), ["not_retryable", 1]);
  assert.deepEqual(await stopped(networkError, unkeyed), ["not_retryable", 1]);
  // The last attempt: attempts, before the Retry-After or timeout checks.
  const tooLong = status(503, { "retry-after": "3600" });
  assert.deepEqual(await stopped(tooLong, { maxAttempts: 1 }), ["attempts", 1]);
  assert.deepEqual(await stopped(networkError, { maxAttempts: 1 }), [
    "attempts",
    1,
  ]);
  // A Retry-After over maxRetryAfter: retry_after, before the timeout check.
  assert.deepEqual(await stopped(tooLong, { timeout: 1 }), ["retry_after", 1]);
  const late = { timeout: 1, random: () => 0.5 };
  assert.deepEqual(await stopped(status(503), late), ["deadline", 1]);
  assert.deepEqual(await stopped(status(200)), [null, 1]);
  // A success and an error status: stopped is null only for the success.
  assert.deepEqual(await stopped(status(399)), [null, 1]);
  assert.deepEqual(await stopped(status(400)), ["not_retryable", 1]);
});

Deno.test("createIdempotentFetch() by default keeps a stream body of 1 MiB and refuses one byte more", async () => {
  for (const [size, sent] of [[1_048_576, true], [1_048_577, false]] as const) {
    const client = fakeClient(() => new Response("ok"));
    const outcome = await client.post({ body: frames([pattern(size)]) })
      .then((r) => r.stopped, (e) => e.reason);
    assert.equal(outcome, sent ? null : "body_too_large", `${size} bytes`);
    assert.equal(client.calls(), sent ? 1 : 0);
  }
});

Deno.test("createIdempotentFetch() honours a Retry-After date exactly maxRetryAfter away and stops at one second more", async () => {
  for (
    const [ahead, reason] of [[5, "attempts"], [6, "retry_after"]] as const
  ) {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0);
    const date = new Date(now + ahead * 1000).toUTCString();
    const infos: RetryInfo[] = [];
    const client = fakeClient(
      () =>
        new Response(null, { status: 503, headers: { "retry-after": date } }),
      {
        clock: () => now,
        maxRetryAfter: 5_000,
        maxAttempts: 2,
        onRetry: (info) => infos.push(info),
      },
    );
    const result = await client.post();
    assert.equal(result.stopped?.reason, reason, `${ahead} s ahead`);
    assert.deepEqual(
      infos.map((i) => i.retryAfter),
      ahead === 5 ? [5_000] : [],
    );
  }
});

Deno.test("createIdempotentFetch() never retries an attempt that its abort or its timeout ended", async () => {
  const retries: RetryInfo[] = [];
  let sleeps = 0;
  const hanging = (request: Request) =>
    new Promise<Response>((_, reject) =>
      request.signal.addEventListener(
        "abort",
        () => reject(request.signal.reason),
        { once: true },
      )
    );
  const options = {
    fetch: hanging,
    onRetry: (info: RetryInfo) => retries.push(info),
    sleep: () => Promise.resolve(void sleeps++),
  };
  const controller = new AbortController();
  const pending = createIdempotentFetch(options)("http://api.test/payments", {
    method: "POST",
    signal: controller.signal,
  }).catch((e) => e);
  controller.abort();
  const aborted = await pending;
  assert.equal(aborted.reason, "aborted");
  assert.equal(aborted.attempts, 1);
  const timedOut = await createIdempotentFetch({ ...options, timeout: 1 })(
    "http://api.test/payments",
    { method: "POST" },
  ).catch((e) => e);
  assert.equal(timedOut.reason, "deadline");
  assert.equal(timedOut.attempts, 1);
  assert.deepEqual(retries, []);
  assert.equal(sleeps, 0);
});

Deno.test("createIdempotentFetch() waits the longer of Retry-After and the backoff", async () => {
  for (const [seconds, wait] of [[0, 999], [1, 1_000], [2, 2_000]] as const) {
    const client = fakeClient(() =>
      new Response(null, {
        status: 503,
        headers: { "retry-after": `${seconds}` },
      }), {
      maxAttempts: 2,
      baseDelay: 1_000,
      random: () => 0.999,
    });
    await client.post();
    assert.deepEqual(client.waits, [wait], `Retry-After: ${seconds}`);
  }
});

Deno.test("createIdempotentFetch() with maxAttempts 1 sends a stream body as it is, whatever maxBodyBytes", async () => {
  const sent: number[] = [];
  const client = fakeClient(() => new Response("ok"), {
    maxAttempts: 1,
    maxBodyBytes: 10,
    fetch: async (request) => {
      sent.push((await request.arrayBuffer()).byteLength);
      return new Response("ok");
    },
  });
  const result = await client.post({ body: frames([pattern(11)]) });
  assert.equal(result.stopped, null);
  assert.deepEqual(sent, [11]);
});

Deno.test("createIdempotentFetch() takes an idempotencyKey of 255 characters, refuses 256 and one with whitespace around", async () => {
  const client = fakeClient(() => new Response("ok"));
  const key = "k".repeat(255);
  assert.equal((await client.post({ idempotencyKey: key })).key, key);
  for (const bad of [`${key}k`, " abc", "abc\t"]) {
    await assert.rejects(
      () => client.post({ idempotencyKey: bad }),
      /^TypeError: 'idempotencyKey' must be 1 to 255 printable ASCII/,
      JSON.stringify(bad),
    );
  }
  assert.equal(client.calls(), 1);
});

Deno.test("createIdempotentFetch() takes each numeric option from its minimum and refuses one less; retryStatuses from 500 to 599", () => {
  const bounds = {
    maxAttempts: 1,
    timeout: 1,
    baseDelay: 0,
    maxDelay: 0,
    maxRetryAfter: 0,
    maxBodyBytes: 0,
  } as const;
  for (const [name, min] of Object.entries(bounds)) {
    createIdempotentFetch({ [name]: min });
    createIdempotentFetch({ [name]: Number.MAX_SAFE_INTEGER });
    const word = min === 1 ? "positive" : "non-negative";
    for (const bad of [min - 1, Number.MAX_SAFE_INTEGER + 1]) {
      assert.throws(
        () => createIdempotentFetch({ [name]: bad }),
        new RegExp(
          `^RangeError: '${name}' must be a ${word} integer: current value is ${bad}$`,
        ),
      );
    }
  }
  for (const status of [500, 599]) {
    createIdempotentFetch({ retryStatuses: [status] });
  }
  for (const status of [499, 600]) {
    assert.throws(
      () => createIdempotentFetch({ retryStatuses: [status] }),
      /^RangeError: 'retryStatuses' must be a list of 5xx statuses/,
    );
  }
});

Deno.test("createIdempotentFetch() keys a method in any case, and takes methods in any case", async () => {
  const keyed = async (method: string, options: IdempotentFetchOptions) => {
    let seen: string | null = null;
    const send = createIdempotentFetch({
      ...options,
      fetch: (request) => {
        seen = request.headers.get("idempotency-key");
        return new Response("ok");
      },
    });
    const result = await send("http://api.test/x", { method, body: "{}" });
    assert.equal(seen, result.key);
    return result.key !== null;
  };
  assert.equal(await keyed("post", {}), true);
  assert.equal(await keyed("Patch", {}), true);
  assert.equal(await keyed("PUT", { methods: ["put"] }), true);
  assert.equal(await keyed("POST", { methods: ["put"] }), false);
});

Deno.test("createIdempotentFetch() cancels the body of each answer it retries, and leaves the last one's unread", async () => {
  const cancelled: number[] = [];
  const client = fakeClient((attempt) =>
    new Response(
      frames([pattern(8)], { onCancel: () => cancelled.push(attempt) }),
      { status: attempt < 3 ? 503 : 201 },
    ), { maxAttempts: 3 });
  const result = await client.post();
  assert.equal(result.response.status, 201);
  assert.deepEqual(cancelled, [1, 2]);
  assert.equal((await result.response.arrayBuffer()).byteLength, 8);
});

Deno.test("createIdempotentFetch() rejects with the error of a sleep that fails, and stops listening to the caller's signal once it has ended", async () => {
  const broken = new Error("sleep broke");
  const client = fakeClient(() => new Response(null, { status: 503 }), {
    sleep: () => Promise.reject(broken),
  });
  assert.equal(await client.post().catch((e) => e), broken);

  const seen: Request[] = [];
  const controller = new AbortController();
  const result = await createIdempotentFetch({
    fetch: (request) => {
      seen.push(request);
      return new Response("ok");
    },
  })("http://api.test/payments", {
    method: "POST",
    signal: controller.signal,
  });
  controller.abort(); // after the call: the response is the caller's now
  assert.equal(result.response.status, 200);
  assert.equal(seen[0]!.signal.aborted, false);
});
