// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The client's options and keys: a Retry-After date, which methods it keys,
 * the caller's own key and its bounds, and every option checked eagerly,
 * naming the option and the value.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  createIdempotentFetch,
  type IdempotentFetchOptions,
} from "../../src/client/client.ts";
import { fakeClient, recordingSleep } from "./_client_fixtures.ts";

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
      /^'timeout' must be a positive integer of milliseconds: current value is -1$/,
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
    const counts = ["maxAttempts", "maxBodyBytes"];
    const unit = counts.includes(name) ? "" : " of milliseconds";
    for (const bad of [min - 1, Number.MAX_SAFE_INTEGER + 1]) {
      assert.throws(
        () => createIdempotentFetch({ [name]: bad }),
        new RegExp(
          `^RangeError: '${name}' must be a ${word} integer${unit}: current value is ${bad}$`,
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
