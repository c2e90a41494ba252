// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * FailoverStore's peek, forget and stats on both stores
 * (src/stores/_failover_both.ts): which store's record a peek reports, a
 * forget on both, a failure of one store, a store without the method.
 *
 * @module
 */
import assert from "node:assert/strict";
import { MemoryStore } from "../../src/stores/memory.ts";
import { FailoverStore } from "../../src/stores/failover.ts";
import { type IdempotencyStore, StoreError } from "../../src/store.ts";

const options = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 60_000 };
const done = { status: 201, headers: [], body: new Uint8Array([1]) };

/** A store on `memory` whose admin methods throw while `down.is`. */
function switchable(
  memory: MemoryStore,
  down: { is: boolean },
): IdempotencyStore {
  const up = <T>(run: () => Promise<T>) =>
    down.is ? Promise.reject(new Error("ECONNREFUSED")) : run();
  return {
    claim: (slot, o) => memory.claim(slot, o),
    complete: (slot, token, r) => memory.complete(slot, token, r),
    release: (slot, token) => memory.release(slot, token),
    extend: (slot, token, ms) => memory.extend(slot, token, ms),
    peek: (slot) => up(() => memory.peek(slot)),
    forget: (slot) => up(() => memory.forget(slot)),
  };
}

async function completed(store: MemoryStore, slot: string): Promise<void> {
  const claim = await store.claim(slot, options);
  assert.ok(claim.state === "acquired");
  assert.equal(await store.complete(slot, claim.token, done), "applied");
}

Deno.test("FailoverStore.peek() reports what a claim would find: the primary's, else the fallback's completed record", async () => {
  const [p, f] = [new MemoryStore(), new MemoryStore()];
  const store = new FailoverStore({ primary: p, fallback: f });
  await completed(f, "only-fallback");
  assert.equal((await store.peek("only-fallback")).state, "completed");
  await p.claim("orphan", options); // an orphan of an outage in the primary
  await completed(f, "orphan");
  assert.equal((await store.peek("orphan")).state, "completed");
  await p.claim("held", options);
  await f.claim("held", { ...options, fingerprint: "other" });
  const held = await store.peek("held");
  assert.ok(held.state === "in_flight" && held.fingerprint === "fp");
  assert.deepEqual(await store.peek("none"), { state: "absent" });
});

Deno.test("FailoverStore.peek() reports the primary's record when both are completed: a claim replays it", async () => {
  const [p, f] = [new MemoryStore(), new MemoryStore()];
  const store = new FailoverStore({ primary: p, fallback: f });
  for (const [memory, status] of [[p, 201], [f, 202]] as const) {
    const claim = await memory.claim("both", options);
    assert.ok(claim.state === "acquired");
    await memory.complete("both", claim.token, { ...done, status });
  }
  const peeked = await store.peek("both");
  assert.ok(peeked.state === "completed" && peeked.status === 201);
  const claimed = await store.claim("both", options);
  assert.ok(claimed.state === "completed" && claimed.response.status === 201);
});

Deno.test("FailoverStore.peek() answers from the store that answers, and throws when both throw", async () => {
  const [pm, fm] = [new MemoryStore(), new MemoryStore()];
  const [pd, fd] = [{ is: true }, { is: false }];
  const store = new FailoverStore({
    primary: switchable(pm, pd),
    fallback: switchable(fm, fd),
  });
  await completed(fm, "s");
  assert.equal((await store.peek("s")).state, "completed");
  fd.is = true;
  const error = await store.peek("s").catch((e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal(error.operation, "peek");
  assert.ok(error.cause instanceof AggregateError);
});

Deno.test("FailoverStore.forget() forgets on both stores, and throws when either throws", async () => {
  const [pm, fm] = [new MemoryStore(), new MemoryStore()];
  const [pd, fd] = [{ is: false }, { is: false }];
  const store = new FailoverStore({
    primary: switchable(pm, pd),
    fallback: switchable(fm, fd),
  });
  await completed(pm, "both");
  await completed(fm, "both");
  assert.equal(await store.forget("both"), "deleted");
  assert.deepEqual([await pm.peek("both"), await fm.peek("both")], [
    { state: "absent" },
    { state: "absent" },
  ]);
  await completed(fm, "one");
  assert.equal(await store.forget("one"), "deleted");
  assert.equal(await store.forget("one"), "absent");
  await completed(fm, "down");
  pd.is = true;
  const error = await store.forget("down").catch((e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal(error.operation, "forget");
  assert.match(error.message, /primary store failed to forget/);
  assert.deepEqual(
    await fm.peek("down"),
    { state: "absent" },
    "the fallback forgot",
  );
});

Deno.test("FailoverStore.stats() counts the fallback; a store without the method is a TypeError naming it", async () => {
  const [p, f] = [new MemoryStore(), new MemoryStore()];
  await completed(f, "a");
  await p.claim("b", options);
  const store = new FailoverStore({ primary: p, fallback: f });
  assert.deepEqual(await store.stats(), {
    inFlight: 0,
    completed: 1,
    unreadable: 0,
    exact: true,
    sealed: {},
  });
  const bare = new FailoverStore({
    primary: p,
    fallback: switchable(f, { is: false }),
  });
  await assert.rejects(bare.stats(), {
    name: "TypeError",
    message: /fallback store's stats\(\)/,
  });
  const plain: IdempotencyStore = {
    claim: (slot, o) => p.claim(slot, o),
    complete: (slot, token, r) => p.complete(slot, token, r),
    release: (slot, token) => p.release(slot, token),
    extend: (slot, token, ms) => p.extend(slot, token, ms),
  };
  const old = new FailoverStore({ primary: plain, fallback: f });
  await assert.rejects(old.peek("a"), {
    name: "TypeError",
    message: /primary store's peek\(\)/,
  });
  await assert.rejects(old.forget("a"), {
    name: "TypeError",
    message: /primary store's forget\(\)/,
  });
});
