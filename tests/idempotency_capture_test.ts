// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's response capture: a cacheable body within the cap is
 * recorded and replayed in full; a larger, failing, locked or cancelled one
 * reaches the client intact and is recorded without its body (the rules
 * "terminal rule" and "body integrity" of docs/architecture.md).
 *
 * @module
 */

import assert from "node:assert/strict";
import { BODY_OMITTED_HEADER, drainCompletions, idempotency } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { bytesOf, frames, pattern, sameBytes } from "./_support/bytes.ts";
import { deferred } from "./_support/time.ts";
import { post } from "./_support/http.ts";
import { recorder } from "./_support/stores.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import { CAP, counting } from "./_support/idempotency.ts";

Deno.test("idempotency() streams an oversized 2xx intact and records it without a body", async () => {
  const body = pattern(3 * CAP + 17);
  const { state, handler } = counting(() =>
    new Response(frames([body.subarray(0, 100), body.subarray(100)]))
  );
  const store = new MemoryStore();
  const log = recorder();
  const guarded = idempotency(handler, {
    scope: "global",
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
  const guarded = idempotency(handler, {
    scope: "global",
    maxResponseBytes: CAP,
  });
  assert.ok(sameBytes(await bytesOf(await guarded(post("exact"))), body));
  const replay = await guarded(post("exact"));
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), null);
  assert.ok(sameBytes(await bytesOf(replay), body));
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() records a body one byte over the cap as omitted", async () => {
  const body = pattern(CAP + 1, 3);
  const { state, handler } = counting(() => new Response(body));
  const guarded = idempotency(handler, {
    scope: "global",
    maxResponseBytes: CAP,
  });
  assert.ok(sameBytes(await bytesOf(await guarded(post("over"))), body));
  const replay = await guarded(post("over"));
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "too_large");
  assert.equal((await bytesOf(replay)).byteLength, 0);
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() passes a giant single frame through without copying its tail", async () => {
  const giant = pattern(32 * 1024 * 1024, 4);
  const guarded = idempotency(() => new Response(frames([giant])), {
    scope: "global",
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
    scope: "global",
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
      scope: "global",
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
    scope: "global",
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
    scope: "global",
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
  const guarded = idempotency(handler, {
    scope: "global",
    maxResponseBytes: CAP,
  });
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
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    maxResponseBytes: CAP,
  });
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

Deno.test("idempotency() records a 2xx whose body is locked as a stream error and never leaves the key in flight", async () => {
  const body = new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull: (c) => c.enqueue(pattern(10)),
  });
  const locked = new Response(body);
  locked.body!.getReader(); // someone else holds the body
  const { state, handler } = counting(() => locked);
  const guarded = idempotency(handler, { scope: "global" });
  const live = await guarded(post("locked"));
  await assert.rejects(() => live.arrayBuffer());
  const replay = await guarded(post("locked"));
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "stream_error");
  assert.equal(state.runs, 1);
});
