// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * When FailoverStore trusts its fallback, on MemoryStores: it refuses claims
 * while the fallback has never answered, trusts one that has, and asks it
 * when the primary answers in flight.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../src/stores/memory.ts";
import { FailoverStore } from "../../src/stores/failover.ts";
import {
  type ClaimResult,
  type IdempotencyStore,
  StoreError,
} from "../../src/store.ts";
import {
  memoryPair,
  ok,
  opts,
  Switchable,
  token,
} from "./_failover_fixtures.ts";

Deno.test("FailoverStore refuses a claim, loudly, while its fallback has never answered", async () => {
  const missingTable: IdempotencyStore = {
    claim: () =>
      Promise.reject(new Error('relation "idempotency_keys" does not exist')),
    complete: () => Promise.resolve("lost"),
    release: () => Promise.resolve("lost"),
    extend: () => Promise.resolve("lost"),
  };
  const store = new FailoverStore({
    primary: new MemoryStore(),
    fallback: missingTable,
  });
  // A 503 through the middleware, not a silent success.
  await assert.rejects(store.claim("slot-1", opts("f")), StoreError);
});

/** What `claim` settles with: a token's route, or the refusal's message. */
function settled(claim: Promise<ClaimResult>): Promise<string> {
  return claim.then(
    (result) => token(result).slice(0, 2),
    (error: unknown) => {
      assert.ok(error instanceof StoreError, String(error));
      return error.message;
    },
  );
}

Deno.test("FailoverStore trusts a fallback that has served claims while the primary was down", async () => {
  const { primary, fallback, events, store } = memoryPair();
  primary.down = true;
  assert.equal(await settled(store.claim("a", opts("fp"))), "f:");
  primary.down = false;
  fallback.down = true;
  // The fallback answered once: its outage now grants the primary alone.
  assert.equal(await settled(store.claim("b", opts("fp"))), "p:");
  assert.deepEqual(events.map((e) => e.type), [
    "fallback",
    "fallback_unavailable",
  ]);
});

Deno.test("FailoverStore trusts a fallback that has answered a claim of both stores", async () => {
  const { fallback, events, store } = memoryPair();
  assert.equal(await settled(store.claim("a", opts("fp"))), "b:");
  fallback.down = true;
  assert.equal(await settled(store.claim("b", opts("fp"))), "p:");
  assert.deepEqual(events.map((e) => e.type), ["fallback_unavailable"]);
});

Deno.test("FailoverStore refuses a claim while its fallback has never answered, and releases the primary's", async () => {
  const { primary, fallback, events, store } = memoryPair();
  fallback.down = true;
  const refusal = await settled(store.claim("a", opts("fp")));
  assert.match(refusal, /has not answered once/);
  assert.deepEqual(events.map((e) => e.type), ["fallback_unavailable"]);
  assert.equal((await primary.inner.claim("a", opts("fp"))).state, "acquired");
  assert.match(await settled(store.claim("b", opts("fp"))), /not answered/);
});

Deno.test("FailoverStore strict refuses a claim on the primary alone, even from a trusted fallback", async () => {
  const primary = new Switchable(new MemoryStore());
  const fallback = new Switchable(new MemoryStore());
  const store = new FailoverStore({ primary, fallback, strict: true });
  assert.equal(await settled(store.claim("a", opts("fp"))), "b:");
  fallback.down = true;
  assert.match(await settled(store.claim("b", opts("fp"))), /'strict'/);
  assert.equal((await primary.inner.claim("b", opts("fp"))).state, "acquired");
});

Deno.test("FailoverStore asks the fallback when the primary answers in flight: an orphan there does not hide a completed run", async () => {
  const { primary, fallback, events, store } = memoryPair();
  // The run went through the fallback while the primary was down...
  const served = token(await fallback.inner.claim("s", opts("fp")));
  assert.equal(
    await fallback.inner.complete("s", served, ok("done")),
    "applied",
  );
  // ...and the primary's claim of that request landed late: an orphan.
  token(await primary.inner.claim("s", opts("fp")));
  const retry = await store.claim("s", opts("fp"));
  assert.equal(retry.state, "completed");
  assert.deepEqual(events.map((e) => e.type), ["recovered"]);
});

Deno.test("FailoverStore keeps a real in-flight claim in flight, and its fallback look-up leaves no claim behind", async () => {
  const { primary, fallback, store } = memoryPair();
  token(await store.claim("t", opts("fp")));
  assert.equal((await store.claim("t", opts("fp"))).state, "in_flight");
  token(await primary.inner.claim("u", opts("fp"))); // held by the primary alone
  assert.equal((await store.claim("u", opts("fp"))).state, "in_flight");
  assert.equal((await fallback.inner.claim("u", opts("fp"))).state, "acquired");
});

Deno.test("FailoverStore leaves the primary's in flight when the fallback is unreachable", async () => {
  const { fallback, store } = memoryPair();
  token(await store.claim("t", opts("fp")));
  fallback.down = true;
  assert.equal((await store.claim("t", opts("fp"))).state, "in_flight");
});
