// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's options: their eager checks, `cacheable`, `fingerprint`,
 * `header`, `replayHeader` and the `onEvent` hook.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { slotOf } from "../src/fingerprint.ts";
import { post, recorder } from "./_helpers.ts";
import { counting } from "./_idempotency.ts";

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

Deno.test("idempotency() refuses to guard a method that the handler's request could not carry (CONNECT, TRACE, TRACK)", () => {
  const ok = () => new Response();
  // `new Request()` refuses these methods, so a guarded one would be claimed
  // and then fail to reach the handler: a 500, and the key held for a lease.
  for (const method of ["CONNECT", "trace", "Track"]) {
    assert.throws(
      () => idempotency(ok, { methods: ["POST", method] }),
      /'methods' cannot guard/,
      method,
    );
  }
});
