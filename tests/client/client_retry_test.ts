// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * When the client retries, how long it waits and why it stops, on fake time:
 * Retry-After against `maxRetryAfter` and the timeout, the backoff and its
 * defaults, every StopReason, aborts, and a sleep that fails.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  createIdempotentFetch,
  IdempotentFetchError,
  type IdempotentFetchOptions,
  type RetryInfo,
} from "../../src/client/client.ts";
import { fakeClient } from "./_client_fixtures.ts";

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
