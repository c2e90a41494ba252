// Copyright 2026 the @idempotent/http authors. MIT license.
import assert from "node:assert/strict";
import {
  BODY_OMITTED_HEADER,
  drainCompletions,
  idempotency,
  PROBLEM_TYPES,
} from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { slotOf } from "../src/fingerprint.ts";
import {
  bytesOf,
  deferred,
  FaultyStore,
  frames,
  pattern,
  post,
  recorder,
  sameBytes,
  sleep,
} from "./_helpers.ts";
import { until } from "./_wait.ts";

const CAP = 1024;

function counting(
  make: (req: Request, n: number) => Response | Promise<Response>,
) {
  const state = { runs: 0 };
  const handler = async (req: Request) => {
    state.runs++;
    return await make(req, state.runs);
  };
  return { state, handler };
}

// ---------------------------------------------------------------- the 17-case matrix

Deno.test("idempotency() streams an oversized 2xx intact and records it without a body", async () => {
  const body = pattern(3 * CAP + 17);
  const { state, handler } = counting(() =>
    new Response(frames([body.subarray(0, 100), body.subarray(100)]))
  );
  const store = new MemoryStore();
  const log = recorder();
  const guarded = idempotency(handler, {
    store,
    maxResponseBytes: CAP,
    onEvent: log.onEvent,
  });
  const live = await guarded(post("big"));
  assert.equal(live.status, 200);
  assert.ok(
    sameBytes(await bytesOf(live), body),
    "the live body is the handler's bytes",
  );
  assert.deepEqual(log.types(), ["claimed", "overflow", "completed"]);
  const replay = await guarded(post("big"));
  assert.equal(replay.status, 200);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "too_large");
  assert.equal((await bytesOf(replay)).byteLength, 0);
  assert.equal(state.runs, 1, "the handler ran once");
});

Deno.test("idempotency() replays a body of exactly the cap in full", async () => {
  const body = pattern(CAP, 2);
  const { state, handler } = counting(() =>
    new Response(frames([body.subarray(0, 1), body.subarray(1)]))
  );
  const guarded = idempotency(handler, { maxResponseBytes: CAP });
  assert.ok(sameBytes(await bytesOf(await guarded(post("exact"))), body));
  const replay = await guarded(post("exact"));
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), null);
  assert.ok(sameBytes(await bytesOf(replay), body));
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() records a body one byte over the cap as omitted", async () => {
  const body = pattern(CAP + 1, 3);
  const { state, handler } = counting(() => new Response(body));
  const guarded = idempotency(handler, { maxResponseBytes: CAP });
  assert.ok(sameBytes(await bytesOf(await guarded(post("over"))), body));
  const replay = await guarded(post("over"));
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "too_large");
  assert.equal((await bytesOf(replay)).byteLength, 0);
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() passes a giant single frame through without copying its tail", async () => {
  const giant = pattern(32 * 1024 * 1024, 4);
  const guarded = idempotency(() => new Response(frames([giant])), {
    maxResponseBytes: CAP,
  });
  const live = await guarded(post("giant"));
  const reader = live.body!.getReader();
  const chunks: Uint8Array[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
  }
  const total = chunks.reduce((n, c) => n + c.byteLength, 0);
  assert.equal(total, giant.byteLength);
  const tail = chunks.find((c) => c.byteLength === giant.byteLength - CAP);
  assert.ok(tail, "the tail arrives as one chunk");
  assert.equal(
    tail.buffer,
    giant.buffer,
    "the tail is a view of the handler's frame, not a copy",
  );
  assert.equal(tail.byteOffset, CAP);
});

Deno.test("idempotency() keeps the live body intact when complete throws, and reports it", async () => {
  const store = new FaultyStore(new MemoryStore());
  store.failing.add("complete");
  const log = recorder();
  const body = pattern(500, 5);
  const guarded = idempotency(() => new Response(body, { status: 201 }), {
    store,
    onEvent: log.onEvent,
    completionWait: 0,
    completionTimeout: 100,
  });
  const live = await guarded(post("fault"));
  assert.equal(live.status, 201);
  assert.ok(sameBytes(await bytesOf(live), body));
  await drainCompletions(guarded);
  const completed = log.events.find((e) => e.type === "completed");
  assert.equal(completed?.type === "completed" && completed.outcome, "unknown");
  assert.ok(
    log.events.some((e) =>
      e.type === "store_error" && e.operation === "complete"
    ),
  );
  assert.equal(store.calls.release, 0, "a 2xx is never released");
});

Deno.test("idempotency() streams an overflow intact when complete throws", async () => {
  const store = new FaultyStore(new MemoryStore());
  store.failing.add("complete");
  const body = pattern(5 * CAP, 6);
  const guarded = idempotency(
    () => new Response(frames([body.subarray(0, 10), body.subarray(10)])),
    {
      store,
      maxResponseBytes: CAP,
      completionWait: 0,
      completionTimeout: 100,
    },
  );
  const live = await guarded(post("fault-big"));
  assert.ok(sameBytes(await bytesOf(live), body));
  await drainCompletions(guarded);
  assert.equal(store.calls.release, 0);
});

Deno.test("idempotency() passes an oversized non-2xx through untouched and releases the key", async () => {
  const body = pattern(4 * CAP, 7);
  const original = new Response(frames([body]), {
    status: 500,
    headers: { "x-error": "boom" },
  });
  const { state, handler } = counting((_req, n) =>
    n === 1 ? original : new Response("ok")
  );
  const log = recorder();
  const guarded = idempotency(handler, {
    maxResponseBytes: CAP,
    onEvent: log.onEvent,
  });
  const live = await guarded(post("fail"));
  assert.equal(live, original, "the very response object comes back");
  assert.ok(sameBytes(await bytesOf(live), body));
  assert.ok(
    log.events.some((e) =>
      e.type === "released" && e.reason === "not_cacheable" &&
      e.outcome === "applied"
    ),
  );
  const retry = await guarded(post("fail"));
  assert.equal(await retry.text(), "ok");
  assert.equal(state.runs, 2, "a released key runs again");
});

Deno.test("idempotency() records a 2xx whose body errors before the cap as completed, and the live stream errors", async () => {
  const prefix = pattern(100, 8);
  const { state, handler } = counting(() =>
    new Response(
      frames([prefix], { errorAfter: 1, error: new Error("db went away") }),
      { status: 201 },
    )
  );
  const log = recorder();
  const guarded = idempotency(handler, {
    maxResponseBytes: CAP,
    onEvent: log.onEvent,
  });
  const live = await guarded(post("err-early"));
  assert.equal(live.status, 201);
  const reader = live.body!.getReader();
  const first = await reader.read();
  assert.ok(
    first.value && sameBytes(first.value, prefix),
    "the bytes before the error arrive",
  );
  await assert.rejects(() => reader.read(), /db went away/);
  assert.ok(log.events.some((e) => e.type === "body_error"));
  const replay = await guarded(post("err-early"));
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "stream_error");
  assert.equal(state.runs, 1, "the terminal rule: never re-run after a 2xx");
});

Deno.test("idempotency() records a body that errors after the cap as too large, and the live stream errors after the bytes", async () => {
  const head = pattern(2 * CAP, 9);
  const { state, handler } = counting(() =>
    new Response(
      frames([head.subarray(0, CAP), head.subarray(CAP)], { errorAfter: 2 }),
    )
  );
  const guarded = idempotency(handler, { maxResponseBytes: CAP });
  const live = await guarded(post("err-late"));
  const reader = live.body!.getReader();
  let total = 0;
  await assert.rejects(async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
    }
  }, /body failed/);
  assert.equal(
    total,
    head.byteLength,
    "every byte before the error reaches the client",
  );
  const replay = await guarded(post("err-late"));
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "too_large");
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() answers 422 when a key is reused with another body, path or query", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const log = recorder();
  const guarded = idempotency(handler, { onEvent: log.onEvent });
  await (await guarded(post("k", '{"amount":1}'))).text();
  for (
    const other of [
      post("k", '{"amount":2}'),
      post("k", '{"amount":1}', { path: "/refunds" }),
      post("k", '{"amount":1}', { path: "/payments?x=1" }),
      post("k", '{"amount":1}', { method: "PATCH" }),
    ]
  ) {
    const res = await guarded(other);
    assert.equal(res.status, 422);
    assert.equal(res.headers.get("content-type"), "application/problem+json");
    const problem = await res.json();
    assert.equal(problem.type, PROBLEM_TYPES.reused);
    assert.equal(problem.status, 422);
    assert.equal(typeof problem.title, "string");
    assert.equal(typeof problem.detail, "string");
    assert.equal(typeof problem.instance, "string");
  }
  assert.equal(state.runs, 1);
  assert.equal(log.types().filter((t) => t === "mismatch").length, 4);
});

Deno.test("idempotency() answers 409 with Retry-After to a loser while the winner streams", async () => {
  const gate = deferred();
  const started = deferred();
  const body = pattern(300, 10);
  const { state, handler } = counting(() => {
    started.resolve();
    return new Response(frames([body], { gate: gate.promise }));
  });
  const guarded = idempotency(handler, { lease: 10_000 });
  const winner = guarded(post("race"));
  await started.promise;
  const loser = await guarded(post("race"));
  assert.equal(loser.status, 409);
  assert.equal(loser.headers.get("retry-after"), "10");
  assert.equal((await loser.json()).type, PROBLEM_TYPES.inFlight);
  gate.resolve();
  assert.ok(sameBytes(await bytesOf(await winner), body));
  const after = await guarded(post("race"));
  assert.ok(sameBytes(await bytesOf(after), body));
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() keeps the record completed when the client cancels the live stream", async () => {
  const cancelled = deferred<unknown>();
  const body = pattern(3 * CAP, 11);
  const { state, handler } = counting(() =>
    new Response(
      frames([body.subarray(0, 2 * CAP), body.subarray(2 * CAP)], {
        onCancel: cancelled.resolve,
      }),
    )
  );
  const store = new MemoryStore();
  const guarded = idempotency(handler, { store, maxResponseBytes: CAP });
  const live = await guarded(post("gone"));
  const reader = live.body!.getReader();
  await reader.read();
  await reader.cancel("client went away");
  assert.equal(
    await cancelled.promise,
    "client went away",
    "the cancel reaches the handler's stream",
  );
  const replay = await guarded(post("gone"));
  assert.equal(replay.status, 200);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() replays status and headers in order", async () => {
  const guarded = idempotency(() =>
    new Response("created", {
      status: 201,
      statusText: "Created",
      headers: [["location", "/payments/7"], ["x-b", "2"], ["x-a", "1"], [
        "content-type",
        "text/plain",
      ]],
    })
  );
  const first = await guarded(post("hdr"));
  const firstHeaders = [...first.headers];
  await first.text();
  const replay = await guarded(post("hdr"));
  assert.equal(replay.status, 201);
  assert.equal(await replay.text(), "created");
  const replayed = [...replay.headers].filter(([name]) =>
    name !== "idempotent-replayed"
  );
  assert.deepEqual(replayed, firstHeaders);
});

Deno.test("idempotency() replays every Set-Cookie separately", async () => {
  const guarded = idempotency(() => {
    const headers = new Headers();
    for (let i = 0; i < 5; i++) {
      headers.append(
        "set-cookie",
        `c${i}=${i}; Path=/; Expires=Wed, 21 Oct 2026 07:28:00 GMT`,
      );
    }
    return new Response("ok", { headers });
  });
  const first = await guarded(post("cookies"));
  await first.text();
  const replay = await guarded(post("cookies"));
  assert.deepEqual(replay.headers.getSetCookie(), first.headers.getSetCookie());
  assert.equal(replay.headers.getSetCookie().length, 5);
});

Deno.test("idempotency() lets a retry take over an expired lease when the heartbeat cannot reach the store, and the stale completion is lost", async () => {
  let now = 0;
  const store = new FaultyStore(new MemoryStore({ clock: () => now }));
  store.failing.add("extend");
  const gate = deferred();
  const log = recorder();
  const { state, handler } = counting(async (_req, n) => {
    if (n === 1) await gate.promise;
    return new Response(`answer ${n}`);
  });
  const guarded = idempotency(handler, {
    store,
    lease: 150,
    onEvent: log.onEvent,
  });
  const first = guarded(post("lease"));
  await until(
    () =>
      log.events.some((e) =>
        e.type === "store_error" && e.operation === "extend"
      ),
    "a failed renewal",
  );
  assert.ok(store.calls.extend > 0, "the heartbeat tried");
  now += 200; // the lease (150) ran out on the store's clock
  const second = await guarded(post("lease"));
  assert.equal(await second.text(), "answer 2");
  assert.ok(log.events.some((e) => e.type === "claimed" && e.recovered));
  gate.resolve();
  const stale = await first;
  assert.equal(
    await stale.text(),
    "answer 1",
    "the stale owner's client still gets its bytes",
  );
  assert.ok(
    log.events.some((e) => e.type === "completed" && e.outcome === "lost"),
  );
  const replay = await guarded(post("lease"));
  assert.equal(
    await replay.text(),
    "answer 2",
    "the new owner's response is the one replayed",
  );
  assert.equal(state.runs, 2);
});

Deno.test("idempotency() renews the lease while a slow handler runs", async () => {
  let now = 0;
  const store = new FaultyStore(new MemoryStore({ clock: () => now }));
  const gate = deferred();
  const { state, handler } = counting(async () => {
    await gate.promise;
    return new Response("slow");
  });
  const guarded = idempotency(handler, { store, lease: 150 });
  const first = guarded(post("slow"));
  // Twice 100 ms of store time, each followed by a renewal: 200 ms after the
  // claim, its first lease (150 ms) would have run out without them.
  for (let i = 1; i <= 2; i++) {
    const seen = store.calls.extend;
    now += 100;
    await until(() => store.calls.extend > seen, `renewal ${i}`);
  }
  now += 10;
  const retry = await guarded(post("slow"));
  assert.equal(retry.status, 409, "the renewed lease still holds");
  await retry.body?.cancel();
  assert.ok(store.calls.extend >= 2, `extends: ${store.calls.extend}`);
  gate.resolve();
  assert.equal(await (await first).text(), "slow");
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() reports lease_lost when a heartbeat finds the slot taken", async () => {
  let now = 0;
  const inner = new MemoryStore({ clock: () => now });
  const gate = deferred();
  const log = recorder();
  const guarded = idempotency(async () => {
    await gate.promise;
    return new Response("x");
  }, { store: inner, lease: 60, onEvent: log.onEvent });
  const first = guarded(post("lost"));
  await until(() => log.types().includes("claimed"), "the claim");
  now += 1_000; // the lease ran out on the store's clock
  const slot = slotOf("", "lost");
  const takeover = await inner.claim(slot, {
    fingerprint: "other",
    leaseMs: 60_000,
    ttlMs: 60_000,
  });
  assert.equal(takeover.state, "acquired");
  await until(() => log.types().includes("lease_lost"), "lease_lost");
  const lost = log.events.find((e) => e.type === "lease_lost");
  assert.ok(lost, log.types().join());
  assert.ok(
    lost.elapsedMs > 0,
    "a heartbeat's event is timed from its request's start",
  );
  gate.resolve();
  await (await first).text();
});

// ---------------------------------------------------------------- protocol

Deno.test("idempotency() treats a quoted and a bare key as one key", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler);
  await (await guarded(post('"abc"'))).text();
  const replay = await guarded(post("abc"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() answers 400 to a malformed key and never calls the store", async () => {
  const store = new FaultyStore(new MemoryStore());
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler, { store });
  for (
    const bad of [
      '"unterminated',
      '"a"; p=1',
      "x".repeat(256),
      '""',
      "caf\u00e9",
      "a b",
      '"tab\there"',
    ]
  ) {
    const res = await guarded(post(bad));
    assert.equal(res.status, 400, `key ${JSON.stringify(bad)}`);
    const problem = await res.json();
    assert.equal(problem.type, PROBLEM_TYPES.malformed);
    assert.equal(problem.instance, "/payments");
  }
  assert.equal(store.calls.claim, 0);
  assert.equal(state.runs, 0);
  const ok = await guarded(post("x".repeat(255)));
  assert.equal(ok.status, 200);
});

Deno.test("idempotency() passes a request without a key through untouched, unless keys are required", async () => {
  const store = new FaultyStore(new MemoryStore());
  let seen: Request | undefined;
  const handler = (req: Request) => {
    seen = req;
    return new Response("ok");
  };
  const optional = idempotency(handler, { store });
  const request = post(null);
  await (await optional(request)).text();
  assert.equal(seen, request, "the very request object reaches the handler");
  assert.equal(request.bodyUsed, false, "its body was not read");
  const get = new Request("http://api.test/payments", {
    headers: { "idempotency-key": "k" },
  });
  await (await optional(get)).text();
  assert.equal(seen, get, "an unguarded method passes through with its key");
  assert.equal(store.calls.claim, 0);

  const required = idempotency(handler, { store, required: true });
  const res = await required(post(null));
  assert.equal(res.status, 400);
  assert.equal((await res.json()).type, PROBLEM_TYPES.missing);
});

Deno.test("idempotency() answers 413 to a body over maxRequestBytes, declared or streamed", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const store = new FaultyStore(new MemoryStore());
  const guarded = idempotency(handler, { store, maxRequestBytes: 100 });
  const declared = await guarded(post("big", pattern(101)));
  assert.equal(declared.status, 413);
  assert.equal((await declared.json()).type, PROBLEM_TYPES.tooLarge);
  const streamed = new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "big2" },
    body: frames([pattern(60), pattern(60)]),
  });
  assert.equal((await guarded(streamed)).status, 413);
  const fits = await guarded(post("ok", pattern(100)));
  assert.equal(fits.status, 200);
  assert.equal(store.calls.claim, 1);
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() hands the handler the same bytes, headers, method and URL", async () => {
  const body = pattern(5000, 12);
  let got: {
    bytes: Uint8Array;
    type: string | null;
    method: string;
    url: string;
  } | undefined;
  const guarded = idempotency(async (req) => {
    got = {
      bytes: new Uint8Array(await req.arrayBuffer()),
      type: req.headers.get("content-type"),
      method: req.method,
      url: req.url,
    };
    return new Response("ok");
  });
  const streamed = new Request("http://api.test/payments?x=1", {
    method: "PATCH",
    headers: {
      "idempotency-key": "same",
      "content-type": "application/octet-stream",
    },
    body: frames([body.subarray(0, 7), body.subarray(7)]),
  });
  await (await guarded(streamed)).text();
  assert.ok(got && sameBytes(got.bytes, body));
  assert.equal(got.type, "application/octet-stream");
  assert.equal(got.method, "PATCH");
  assert.equal(got.url, "http://api.test/payments?x=1");
});

Deno.test("idempotency() gives the handler the original request's signal", async () => {
  const controller = new AbortController();
  let signal: AbortSignal | undefined;
  const guarded = idempotency((req) => {
    signal = req.signal;
    return new Response("ok");
  });
  const request = new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "sig" },
    body: "{}",
    signal: controller.signal,
  });
  await (await guarded(request)).text();
  controller.abort();
  assert.equal(signal?.aborted, true);
});

Deno.test("idempotency() answers 503 with Retry-After when the store is down, and fails open when asked", async () => {
  const store = new FaultyStore(new MemoryStore());
  store.failing.add("claim");
  const log = recorder();
  const { state, handler } = counting(() => new Response("ran"));
  const closed = idempotency(handler, { store, onEvent: log.onEvent });
  const res = await closed(post("down"));
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "1");
  assert.equal((await res.json()).type, PROBLEM_TYPES.unavailable);
  assert.equal(state.runs, 0);
  assert.ok(
    log.events.some((e) => e.type === "store_error" && e.operation === "claim"),
  );

  const open = idempotency(handler, {
    store,
    failOpen: true,
    onEvent: log.onEvent,
  });
  const ran = await open(post("down"));
  assert.equal(await ran.text(), "ran");
  assert.equal(state.runs, 1);
  assert.ok(log.events.some((e) => e.type === "fail_open"));
  assert.equal(
    store.calls.complete,
    0,
    "nothing is recorded for an unguarded run",
  );
});

Deno.test("idempotency() keeps scopes apart: two tenants with one key", async () => {
  const { state, handler } = counting((req) =>
    new Response(req.headers.get("x-tenant"))
  );
  const guarded = idempotency(handler, {
    scope: (req) => req.headers.get("x-tenant") ?? "",
  });
  const a = await guarded(post("1", "{}", { headers: { "x-tenant": "a" } }));
  const b = await guarded(post("1", "{}", { headers: { "x-tenant": "b" } }));
  assert.equal(await a.text(), "a");
  assert.equal(await b.text(), "b");
  const replayA = await guarded(
    post("1", "{}", { headers: { "x-tenant": "a" } }),
  );
  assert.equal(await replayA.text(), "a");
  assert.equal(state.runs, 2);
});

Deno.test("idempotency() releases the key when the handler throws, and rethrows", async () => {
  const log = recorder();
  const { state, handler } = counting((_req, n) => {
    if (n === 1) throw new Error("handler blew up");
    return new Response("second time");
  });
  const guarded = idempotency(handler, { onEvent: log.onEvent });
  await assert.rejects(
    () => Promise.resolve(guarded(post("throw"))),
    /handler blew up/,
  );
  assert.ok(
    log.events.some((e) => e.type === "released" && e.reason === "thrown"),
  );
  assert.equal(await (await guarded(post("throw"))).text(), "second time");
  assert.equal(state.runs, 2);
});

Deno.test("idempotency() replays a 204 with no body, and a binary body byte for byte", async () => {
  const guarded = idempotency((req) =>
    new URL(req.url).pathname === "/empty"
      ? new Response(null, { status: 204 })
      : new Response(pattern(70_000, 13), {
        headers: { "content-type": "application/octet-stream" },
      })
  );
  assert.equal(
    (await guarded(post("e", "{}", { path: "/empty" }))).status,
    204,
  );
  const empty = await guarded(post("e", "{}", { path: "/empty" }));
  assert.equal(empty.status, 204);
  assert.equal(empty.body, null);
  assert.equal(empty.headers.get("idempotent-replayed"), "true");
  await (await guarded(post("bin", "{}", { path: "/bin" }))).arrayBuffer();
  const bin = await guarded(post("bin", "{}", { path: "/bin" }));
  assert.ok(sameBytes(await bytesOf(bin), pattern(70_000, 13)));
});

Deno.test("idempotency() records what cacheable accepts and names the replay header as asked", async () => {
  const { state, handler } = counting(() =>
    Response.json({ error: "card declined" }, { status: 402 })
  );
  const guarded = idempotency(handler, {
    cacheable: (res) => res.status < 500,
    replayHeader: "X-Replayed",
  });
  await (await guarded(post("declined"))).text();
  const replay = await guarded(post("declined"));
  assert.equal(replay.status, 402);
  assert.equal(replay.headers.get("x-replayed"), "true");
  assert.deepEqual(await replay.json(), { error: "card declined" });
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() uses a custom fingerprint and header", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler, {
    header: "X-Request-Id",
    fingerprint: (req) => req.headers.get("x-account") ?? "",
  });
  const send = (account: string, body: string) =>
    guarded(
      new Request("http://api.test/p", {
        method: "POST",
        headers: { "x-request-id": "r1", "x-account": account },
        body,
      }),
    );
  await (await send("acc-1", "a")).text();
  assert.equal(
    (await send("acc-1", "a different body")).headers.get(
      "idempotent-replayed",
    ),
    "true",
  );
  assert.equal((await send("acc-2", "a")).status, 422);
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() validates its options eagerly", () => {
  const ok = () => new Response();
  assert.throws(
    () => idempotency(ok, { ttl: -1 }),
    /'ttl' must be a positive integer: current value is -1/,
  );
  assert.throws(() => idempotency(ok, { lease: 0 }), RangeError);
  assert.throws(
    () => idempotency(ok, { lease: 10, ttl: 5 }),
    /'lease' must not exceed 'ttl'/,
  );
  assert.throws(() => idempotency(ok, { maxRequestBytes: 1.5 }), RangeError);
  assert.throws(() => idempotency(ok, { maxResponseBytes: -1 }), RangeError);
  assert.throws(() => idempotency(ok, { methods: [] }), TypeError);
  assert.throws(() => idempotency(ok, { header: "bad header" }), TypeError);
  assert.throws(() => idempotency(ok, { replayHeader: "" }), TypeError);
  assert.throws(() => idempotency(ok, { required: "yes" as never }), TypeError);
  assert.throws(() => idempotency(ok, { onEvent: 1 as never }), TypeError);
  assert.throws(
    () => idempotency(ok, { store: {} as never }),
    /'store' must implement IdempotencyStore/,
  );
  assert.throws(() => idempotency(null as never), TypeError);
});

Deno.test("idempotency() ignores a listener that throws", async () => {
  const guarded = idempotency(() => new Response("fine"), {
    onEvent: () => {
      throw new Error("listener bug");
    },
  });
  assert.equal(await (await guarded(post("l"))).text(), "fine");
});

Deno.test("idempotency() reports the events of a request's life with its slot and timing", async () => {
  const log = recorder();
  const guarded = idempotency(() => new Response("ok"), {
    onEvent: log.onEvent,
  });
  await (await guarded(post("ev"))).text();
  const slot = slotOf("", "ev");
  for (const event of log.events) {
    assert.equal(event.slot, slot);
    assert.ok(event.elapsedMs >= 0);
  }
  const completed = log.events.find((e) => e.type === "completed");
  assert.ok(
    completed?.type === "completed" && completed.stored === "full" &&
      completed.bytes === 2 && completed.outcome === "applied",
  );
});

Deno.test("idempotency() releases the key and throws when the handler returns no Response", async () => {
  const store = new FaultyStore(new MemoryStore());
  let calls = 0;
  const guarded = idempotency(
    (() => {
      calls++;
      return calls === 1 ? undefined : new Response("second");
    }) as unknown as () => Response,
    { store },
  );
  await assert.rejects(
    () => Promise.resolve(guarded(post("nothing"))),
    /must return a Response/,
  );
  assert.equal(store.calls.release, 1);
  assert.equal(await (await guarded(post("nothing"))).text(), "second");
});

Deno.test("idempotency() records a 2xx whose body is locked as a stream error and never leaves the key in flight", async () => {
  const body = new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull: (c) => c.enqueue(pattern(10)),
  });
  const locked = new Response(body);
  locked.body!.getReader(); // someone else holds the body
  const { state, handler } = counting(() => locked);
  const guarded = idempotency(handler);
  const live = await guarded(post("locked"));
  await assert.rejects(() => live.arrayBuffer());
  const replay = await guarded(post("locked"));
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "stream_error");
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() stores a hash of a custom fingerprint, never what it returned", async () => {
  const store = new MemoryStore();
  const secret = "card=4242424242424242;".repeat(5_000); // over 64 KiB, and private
  const guarded = idempotency(() => new Response("ok"), {
    store,
    fingerprint: () => secret,
  });
  await (await guarded(post("fp-hash"))).text();
  const record = await store.claim(slotOf("", "fp-hash"), {
    fingerprint: "x",
    leaseMs: 1_000,
    ttlMs: 60_000,
  });
  assert.equal(record.state, "completed");
  if (record.state === "completed") {
    assert.match(record.fingerprint, /^[0-9a-f]{64}$/);
  }
});

Deno.test("idempotency() streams a 2xx body that does not end within a lease and records it as too slow, never holding the key for ever", async () => {
  const cancelled = deferred<unknown>();
  let tick = 0;
  const { state, handler } = counting(() =>
    new Response(
      new ReadableStream<Uint8Array<ArrayBuffer>>({
        async pull(controller) {
          await sleep(20);
          controller.enqueue(new TextEncoder().encode(`data: ${tick++}\n\n`));
        },
        cancel: cancelled.resolve,
      }, { highWaterMark: 0 }),
      { headers: { "content-type": "text/event-stream" } },
    )
  );
  const log = recorder();
  const guarded = idempotency(handler, { lease: 150, onEvent: log.onEvent });
  // A liveness guard, not a timing assertion: without the stop, this hangs.
  let guard: ReturnType<typeof setTimeout> | undefined;
  const live = await Promise.race([
    guarded(post("sse")),
    new Promise<never>((_, reject) => {
      guard = setTimeout(
        () => reject(new Error("the capture never stopped")),
        10_000,
      );
    }),
  ]).finally(() => clearTimeout(guard));
  assert.equal(live.status, 200);
  const reader = live.body!.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  assert.match(
    first,
    /^data: 0/,
    "the bytes captured so far come first, then the stream goes on",
  );
  await reader.read();
  assert.ok(
    log.events.some((e) =>
      e.type === "completed" && e.stored === "too_slow" &&
      e.outcome === "applied"
    ),
  );
  const replay = await guarded(post("sse"));
  assert.equal(replay.status, 200, "a retry is answered, not held at 409");
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "too_slow");
  await reader.cancel("client left");
  assert.equal(await cancelled.promise, "client left");
  assert.equal(state.runs, 1);
});
