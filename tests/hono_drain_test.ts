// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `drainCompletions()` takes `/hono`'s middleware as it takes a handler from
 * `idempotency()`: it waits for the record writes that middleware retries in
 * the background, and refuses what is neither.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Hono } from "hono";
import { drainCompletions } from "../src/idempotency.ts";
import { idempotent } from "../src/hono.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { deferred } from "./_support/time.ts";

/** A MemoryStore whose first `complete` throws and whose retry waits for `gate`. */
function flakyStore() {
  const inner = new MemoryStore();
  const gate = deferred();
  const retried = deferred();
  let completes = 0;
  const store: IdempotencyStore = {
    claim: (slot, options) => inner.claim(slot, options),
    async complete(slot, token, response) {
      completes++;
      if (completes === 1) throw new Error("store down for one write");
      retried.resolve();
      await gate.promise;
      return await inner.complete(slot, token, response);
    },
    release: (slot, token) => inner.release(slot, token),
    extend: (slot, token, leaseMs) => inner.extend(slot, token, leaseMs),
  };
  return { store, gate, retried, completes: () => completes };
}

function post(app: Hono): Promise<Response> {
  return Promise.resolve(app.request("/pay", {
    method: "POST",
    headers: { "Idempotency-Key": "hono-drain" },
    body: "{}",
  }));
}

Deno.test("drainCompletions(middleware) waits for the write /hono's middleware retries in the background, then a retry replays", async () => {
  const { store, gate, retried, completes } = flakyStore();
  const middleware = idempotent({
    store,
    scope: "global",
    completionWait: 0,
    logger: false,
  });
  const app = new Hono();
  app.use("/pay", middleware);
  app.post("/pay", (c) => c.json({ paid: true }, 201));

  const first = await post(app);
  assert.equal(first.status, 201);
  assert.deepEqual(await first.json(), { paid: true });
  await retried.promise; // the background retry reached the store

  let drained = false;
  const drain = drainCompletions(middleware).then(() => drained = true);
  // One macrotask turn: the write is held by the gate, so the drain is too.
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(drained, false, "drained before the held write ended");

  gate.resolve();
  await drain;
  assert.equal(drained, true);
  assert.equal(completes(), 2);

  const retry = await post(app);
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get("Idempotent-Replayed"), "true");
  assert.deepEqual(await retry.json(), { paid: true });
});

Deno.test("drainCompletions() of a middleware with nothing pending resolves; of another function it names both accepted kinds", async () => {
  const middleware = idempotent({ store: new MemoryStore(), scope: "global" });
  await drainCompletions(middleware);
  await assert.rejects(
    () => drainCompletions(async (_c: unknown, _next: unknown) => {}),
    TypeError,
    "'handler' must be a handler returned by idempotency() or a middleware returned by idempotent() (/hono): current value is ",
  );
});
