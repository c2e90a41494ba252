// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's leases: renewed while a handler runs, taken over once
 * they run out, and never held for ever by a body that does not end. The
 * stores run on an injected clock, the middleware on fake time
 * (`idempotencyOn(time, …)`): its ticks fire when a test moves that time,
 * never on a real timer. Its own cadence is pinned in lease_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BODY_OMITTED_HEADER } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { slotOf } from "../src/fingerprint.ts";
import { deferred, FakeClock, sleep } from "./_support/time.ts";
import { post } from "./_support/http.ts";
import { recorder } from "./_support/stores.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import { until } from "./_support/time.ts";
import { counting, idempotencyOn } from "./_support/idempotency.ts";

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
  const time = new FakeClock();
  const guarded = idempotencyOn(
    time,
    handler,
    {
      scope: "global",
      store,
      lease: 150,
      onEvent: log.onEvent,
    },
  );
  const first = guarded(post("lease"));
  await until(() => log.types().includes("claimed"), "the claim");
  await time.advance(150); // a renewal is due a third of a lease on
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
  const time = new FakeClock();
  const guarded = idempotencyOn(
    time,
    handler,
    { scope: "global", store, lease: 150 },
  );
  const first = guarded(post("slow"));
  await until(() => state.runs === 1, "the handler's start");
  // Twice 100 ms of store time, each followed by a renewal: 200 ms after the
  // claim, its first lease (150 ms) would have run out without them.
  for (let i = 1; i <= 2; i++) {
    const seen = store.calls.extend;
    now += 100;
    await time.advance(100);
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
  const time = new FakeClock();
  const guarded = idempotencyOn(
    time,
    async () => {
      await gate.promise;
      return new Response("x");
    },
    {
      scope: "global",
      store: inner,
      lease: 60,
      onEvent: log.onEvent,
    },
  );
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
  await time.advance(60); // the next renewal finds the slot taken
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
  const time = new FakeClock();
  const guarded = idempotencyOn(
    time,
    handler,
    { scope: "global", lease: 150, onEvent: log.onEvent },
  );
  const response = guarded(post("sse"));
  await until(() => tick > 0, "the capture's first read");
  await time.advance(150 + 25); // a lease, and the tick that sees it
  // A liveness guard, not a timing assertion: without the stop, this hangs.
  let guard: ReturnType<typeof setTimeout> | undefined;
  const live = await Promise.race([
    response,
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
