// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MemoryStore: the store conformance suite, eviction nearest expiry, the byte
 * bound (bodies dropped before records, header lists and long keys counted),
 * copies of what it is given, option checks and its documented numbers at
 * their boundaries. Its agreement with a reference model and with its
 * eviction policy over random interleavings is in `memory_model_test.ts`;
 * what both share in `_memory_fixtures.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { MemoryStore } from "../../src/stores/memory.ts";
import { StoreError } from "../../src/store.ts";
import { storeConformance } from "../../src/testing/testing.ts";
import { FakeClock } from "../_support/time.ts";
import { options, record } from "./_memory_fixtures.ts";

storeConformance({
  name: "MemoryStore",
  setup() {
    const time = new FakeClock();
    const clock = () => time.now();
    const store = new MemoryStore({ maxEntries: 100_000, clock });
    const advance = (ms: number) => time.advance(ms);
    return Promise.resolve({ store, elapse: advance, advanceClock: advance });
  },
});

async function completeNew(
  store: MemoryStore,
  slot: string,
  body = 10,
  ttlMs = options.ttlMs,
) {
  const claim = await store.claim(slot, { ...options, ttlMs });
  assert.equal(claim.state, "acquired");
  if (claim.state !== "acquired") throw new Error("unreachable");
  assert.equal(
    await store.complete(slot, claim.token, record(body)),
    "applied",
  );
}

Deno.test("MemoryStore evicts the completed record nearest its expiry first", async () => {
  let now = 0;
  const store = new MemoryStore({ maxEntries: 3, clock: () => now });
  await completeNew(store, "late", 10, 9_000);
  await completeNew(store, "early", 10, 2_000);
  await completeNew(store, "middle", 10, 5_000);
  now += 1;
  await completeNew(store, "new");
  assert.equal(store.size, 3);
  assert.equal((await store.claim("late", options)).state, "completed");
  assert.equal((await store.claim("middle", options)).state, "completed");
  assert.equal((await store.claim("early", options)).state, "acquired");
});

Deno.test("MemoryStore never evicts a live claim and refuses a claim when all are live", async () => {
  let now = 0;
  const store = new MemoryStore({ maxEntries: 2, clock: () => now });
  const a = await store.claim("a", options);
  await store.claim("b", options);
  await assert.rejects(() => store.claim("c", options), StoreError);
  assert.equal((await store.claim("a", options)).state, "in_flight");
  assert.equal((await store.claim("b", options)).state, "in_flight");
  // Once a lease runs out, its claim is no longer live and makes room.
  now += options.leaseMs;
  assert.equal((await store.claim("c", options)).state, "acquired");
  if (a.state === "acquired") {
    assert.equal(await store.complete("a", a.token, record(1)), "lost");
  }
});

Deno.test("MemoryStore keeps its bytes under maxBytes by dropping the oldest bodies, not the records", async () => {
  let now = 0;
  const store = new MemoryStore({ maxBytes: 4_000, clock: () => now });
  for (let i = 0; i < 20; i++) {
    now++; // each record expires a little after the one before
    await completeNew(store, `s${i}`, 300);
    assert.ok(store.bytes <= 4_000, `bytes ${store.bytes}`);
  }
  assert.equal(store.size, 20, "every record is kept");
  let kept = 0;
  for (let i = 0; i < 20; i++) {
    const replay = await store.claim(`s${i}`, options);
    assert.equal(replay.state, "completed", `s${i} still replays`);
    if (replay.state !== "completed") continue;
    if (replay.response.body !== null) {
      assert.equal(replay.response.body.byteLength, 300, `s${i}'s body`);
      kept++;
    } else {
      assert.equal(kept, 0, `s${i} lost its body after a newer one kept it`);
      assert.equal(replay.response.omitted, "store_dropped");
    }
  }
  assert.ok(kept >= 2 && kept < 20, `${kept} bodies kept`);
});

Deno.test("MemoryStore keeps a record larger than maxBytes with its body omitted", async () => {
  const store = new MemoryStore({ maxBytes: 100 });
  await completeNew(store, "big", 500);
  const replay = await store.claim("big", options);
  assert.equal(replay.state, "completed");
  if (replay.state === "completed") {
    assert.equal(replay.response.body, null);
    assert.equal(replay.response.omitted, "store_dropped");
  }
});

Deno.test("MemoryStore keeps its own copy of a body that is a view or a small array", async () => {
  const store = new MemoryStore();
  const buffer = new Uint8Array(65_536).map((_, i) => i % 251);
  const view = buffer.subarray(1_000, 6_000);
  const small = new Uint8Array(128).map((_, i) => 255 - i);
  for (const [slot, body] of [["view", view], ["small", small]] as const) {
    const claim = await store.claim(slot, options);
    if (claim.state !== "acquired") throw new Error("unreachable");
    await store.complete(slot, claim.token, { status: 200, headers: [], body });
  }
  const expected = [view.slice(), small.slice()];
  buffer.fill(0); // the caller reuses its buffers: the records do not change
  small.fill(0);
  for (const [i, slot] of ["view", "small"].entries()) {
    const replay = await store.claim(slot, options);
    if (replay.state !== "completed") throw new Error("unreachable");
    assert.deepEqual(replay.response.body, expected[i]);
  }
  const replay = await store.claim("view", options);
  if (replay.state !== "completed") throw new Error("unreachable");
  assert.equal(replay.response.body!.buffer.byteLength, 5_000, "sized exactly");
});

Deno.test("MemoryStore replays every byte value of a small body", async () => {
  const store = new MemoryStore();
  for (const length of [0, 1, 127, 128, 129, 256]) {
    const body = new Uint8Array(length).map((_, i) => (i * 37 + 255) % 256);
    await completeNew(store, `b${length}`, 0);
    const claim = await store.claim(`c${length}`, options);
    if (claim.state !== "acquired") throw new Error("unreachable");
    await store.complete(`c${length}`, claim.token, {
      status: 200,
      headers: [],
      body,
    });
    const replay = await store.claim(`c${length}`, options);
    if (replay.state !== "completed") throw new Error("unreachable");
    assert.deepEqual(replay.response.body, body, `${length} bytes`);
  }
});

Deno.test("MemoryStore counts each record's header list and keeps a frozen copy of its own", async () => {
  const store = new MemoryStore();
  const headers = (): [string, string][] => [
    ["content-type", "application/json"],
    ["x-request-id", "same"],
  ];
  const put = async (slot: string, list: [string, string][]) => {
    const claim = await store.claim(slot, options);
    if (claim.state !== "acquired") throw new Error("unreachable");
    await store.complete(slot, claim.token, {
      status: 200,
      headers: list,
      body: new Uint8Array(4),
    });
  };
  await put("a", headers());
  const one = store.bytes;
  assert.equal(
    one,
    4 + JSON.stringify(headers()).length,
    "a record counts its body and its header list as JSON",
  );
  await put("b", headers());
  assert.equal(store.bytes, 2 * one, "the second record counts the same");
  const given = headers();
  await put("c", given);
  given[0]![1] = "text/plain"; // the caller's list is not the record's
  const replays = await Promise.all(
    ["a", "c"].map((s) => store.claim(s, options)),
  );
  for (const replay of replays) {
    if (replay.state !== "completed") throw new Error("unreachable");
    assert.deepEqual(replay.response.headers, headers());
    assert.ok(Object.isFrozen(replay.response.headers));
  }
  // Once no record holds it, a list no longer counts.
  let now = 0;
  const timed = new MemoryStore({ clock: () => now });
  await completeNew(timed, "t", 0);
  assert.ok(timed.bytes > 0, "the list is counted");
  now += options.ttlMs;
  assert.equal((await timed.claim("t", options)).state, "acquired");
  assert.equal(timed.bytes, 0, "the list went with its last record");
});

Deno.test("MemoryStore forgets the records nearest expiry when their headers alone pass maxBytes", async () => {
  let now = 0;
  const store = new MemoryStore({ maxBytes: 4_000, clock: () => now });
  for (let i = 0; i < 10; i++) {
    now++;
    const claim = await store.claim(`h${i}`, options);
    if (claim.state !== "acquired") throw new Error("unreachable");
    await store.complete(`h${i}`, claim.token, {
      status: 200,
      headers: [["set-cookie", `session=${i}${"x".repeat(600)}`]],
      body: null,
      omitted: "too_large",
    });
    assert.ok(store.bytes <= 4_000, `bytes ${store.bytes}`);
  }
  assert.ok(store.size < 10, `${store.size} records`);
  assert.equal((await store.claim("h9", options)).state, "completed");
  assert.equal((await store.claim("h0", options)).state, "acquired");
});

Deno.test("MemoryStore counts slot and fingerprint characters past 64 against maxBytes", async () => {
  const store = new MemoryStore({ maxBytes: 1_000 });
  const fingerprint = "f".repeat(464);
  const claim = await store.claim("s".repeat(164), { ...options, fingerprint });
  assert.equal(store.bytes, 100 + 400);
  await store.claim("t".repeat(164), { ...options, fingerprint });
  assert.equal(store.bytes, 1_000);
  // Live claims are never dropped for bytes: a third one is refused.
  await assert.rejects(
    () => store.claim("u".repeat(164), { ...options, fingerprint }),
    StoreError,
  );
  if (claim.state !== "acquired") throw new Error("unreachable");
  await store.release("s".repeat(164), claim.token);
  assert.equal(store.bytes, 500);
  assert.equal((await store.claim("x".repeat(64), options)).state, "acquired");
  assert.equal(
    store.bytes,
    500,
    "64 characters are part of a record's overhead",
  );
});

Deno.test("MemoryStore drops expired records as it meets them", async () => {
  let now = 0;
  const store = new MemoryStore({ maxEntries: 2, clock: () => now });
  await completeNew(store, "a");
  await completeNew(store, "b");
  now += options.ttlMs;
  await completeNew(store, "c");
  await completeNew(store, "d");
  assert.equal(store.size, 2);
});

Deno.test("MemoryStore validates its options and arguments", async () => {
  assert.throws(() => new MemoryStore({ maxEntries: 0 }), RangeError);
  assert.throws(() => new MemoryStore({ maxBytes: -1 }), RangeError);
  assert.throws(
    () => new MemoryStore({ maxEntries: 1.5 }),
    /'maxEntries' must be a positive integer: current value is 1.5/,
  );
  const store = new MemoryStore();
  await assert.rejects(
    () => store.claim("s", { ...options, leaseMs: 0 }),
    RangeError,
  );
  await assert.rejects(
    () => store.claim("s", { ...options, ttlMs: NaN }),
    RangeError,
  );
  const claim = await store.claim("s", options);
  if (claim.state !== "acquired") throw new Error("unreachable");
  await assert.rejects(
    () =>
      store.complete("s", claim.token, {
        status: 200,
        headers: [],
        body: null,
      }),
    TypeError,
  );
  await assert.rejects(
    () =>
      store.complete("s", claim.token, {
        status: 99,
        headers: [],
        body: null,
        omitted: "too_large",
      }),
    TypeError,
  );
});

// --- documented numbers at their boundaries ----------------------------------

/** The replayed body's length, or `null` when the record kept none. */
async function keptBody(store: MemoryStore, slot: string) {
  const replay = await store.claim(slot, options);
  if (replay.state !== "completed") throw new Error(`${slot}: ${replay.state}`);
  return replay.response.body?.byteLength ?? null;
}

Deno.test("MemoryStore keeps a body that fills maxBytes exactly and omits one a byte over", async () => {
  // A record of `record(n)` counts its body and its header list, "[]": n + 2.
  const exact = new MemoryStore({ maxBytes: 100 });
  await completeNew(exact, "s", 98);
  assert.equal(exact.bytes, 100);
  assert.equal(await keptBody(exact, "s"), 98);
  const over = new MemoryStore({ maxBytes: 100 });
  await completeNew(over, "s", 99);
  assert.equal(over.bytes, 2, "only the header list is counted");
  assert.equal(await keptBody(over, "s"), null);
});

Deno.test("MemoryStore drops an older body only when a new one would pass maxBytes", async () => {
  const now = 0;
  const fill = async (second: number) => {
    const store = new MemoryStore({ maxBytes: 100, clock: () => now });
    await completeNew(store, "old", 48, 5_000); // 50 bytes, nearest expiry
    await completeNew(store, "new", second, 9_000);
    return store;
  };
  const full = await fill(48); // 100 bytes: exactly maxBytes
  assert.equal(full.bytes, 100);
  assert.equal(await keptBody(full, "old"), 48);
  assert.equal(await keptBody(full, "new"), 48);
  const over = await fill(49); // 101 bytes: the old body goes, not the record
  assert.equal(over.bytes, 2 + 51);
  assert.equal(await keptBody(over, "old"), null);
  assert.equal(await keptBody(over, "new"), 49);
});

Deno.test("MemoryStore holds maxEntries records, and evicts only for the one past it", async () => {
  const now = 0;
  const store = new MemoryStore({ maxEntries: 3, clock: () => now });
  await completeNew(store, "a", 1, 2_000); // nearest expiry
  await completeNew(store, "b", 1, 5_000);
  assert.equal(store.size, 2); // n − 1
  await completeNew(store, "c", 1, 5_000);
  assert.equal(store.size, 3); // n: nothing evicted
  for (const slot of ["a", "b", "c"]) {
    assert.equal((await store.claim(slot, options)).state, "completed", slot);
  }
  await completeNew(store, "d", 1, 5_000); // n + 1: "a" makes room
  assert.equal(store.size, 3);
  assert.equal((await store.claim("b", options)).state, "completed");
  assert.equal((await store.claim("a", options)).state, "acquired");
});

Deno.test("MemoryStore counts each record's own bytes when records share one buffer", async () => {
  const store = new MemoryStore({ maxBytes: 900 });
  const buffer = new ArrayBuffer(4_096);
  const shared = new Uint8Array(buffer, 100, 300);
  const headers: [string, string][] = [["content-type", "text/plain"]];
  const size = JSON.stringify(headers).length;
  for (const slot of ["a", "b"]) {
    const claim = await store.claim(slot, options);
    if (claim.state !== "acquired") throw new Error("unreachable");
    const response = { status: 200, headers, body: shared };
    assert.equal(await store.complete(slot, claim.token, response), "applied");
  }
  // Each counts its own copy of the 300 bytes, not the 4,096 of the buffer.
  assert.equal(store.bytes, 2 * (300 + size));
  assert.equal(await keptBody(store, "a"), 300);
  assert.equal(await keptBody(store, "b"), 300);
  // A third record that passes maxBytes takes the oldest body, and only it.
  const claim = await store.claim("c", options);
  if (claim.state !== "acquired") throw new Error("unreachable");
  const response = { status: 200, headers, body: shared };
  assert.equal(await store.complete("c", claim.token, response), "applied");
  assert.equal(store.bytes, 3 * size + 2 * 300);
  assert.equal(await keptBody(store, "a"), null);
  assert.equal(await keptBody(store, "b"), 300);
  assert.equal(await keptBody(store, "c"), 300);
});

Deno.test("MemoryStore writes are applied for the owner and lost for anyone else, never thrown", async () => {
  let now = 0;
  const store = new MemoryStore({ clock: () => now });
  const claim = await store.claim("s", options);
  if (claim.state !== "acquired") throw new Error("unreachable");
  assert.equal(await store.extend("s", "other", 1_000), "lost");
  assert.equal(await store.release("s", "other"), "lost");
  assert.equal(await store.complete("s", "other", record(1)), "lost");
  assert.equal(await store.extend("s", claim.token, 1_000), "applied");
  now += options.ttlMs - 1; // a millisecond before the TTL: still owned
  assert.equal(await store.extend("s", claim.token, 1_000), "applied");
  now += 1; // at the TTL: gone
  assert.equal(await store.extend("s", claim.token, 1_000), "lost");
  assert.equal(await store.complete("s", claim.token, record(1)), "lost");
  assert.equal(await store.release("s", claim.token), "lost");
});

Deno.test("MemoryStore holds 100,000 records and 64 MiB by default", async () => {
  const store = new MemoryStore();
  for (let i = 0; i < 100_000; i++) await store.claim(`s${i}`, options);
  assert.equal(store.size, 100_000);
  // Every one is a live claim: the next has no room.
  await assert.rejects(() => store.claim("one more", options), StoreError);
  const MiB64 = 67_108_864;
  const exact = new MemoryStore();
  await completeNew(exact, "s", MiB64 - 2); // with its header list, "[]"
  assert.equal(exact.bytes, MiB64);
  assert.equal(await keptBody(exact, "s"), MiB64 - 2);
  const over = new MemoryStore();
  await completeNew(over, "s", MiB64 - 1);
  assert.equal(await keptBody(over, "s"), null);
});

Deno.test("MemoryStore counts a key's characters past 64 twice once one is past U+00FF", async () => {
  const store = new MemoryStore();
  const bytesOf = async (slot: string) => {
    const before = store.bytes;
    await store.claim(slot, options);
    return store.bytes - before;
  };
  assert.equal(await bytesOf("\u00ff".repeat(65)), 1); // one byte a character
  assert.equal(await bytesOf("\u0100" + "a".repeat(64)), 2 * 65 - 64);
  assert.equal(await bytesOf("\u0100".repeat(64)), 0); // within the overhead
});

Deno.test("MemoryStore.forget() gives back the room and bytes the record held", async () => {
  let now = 0;
  const store = new MemoryStore({ maxEntries: 2, clock: () => now });
  const long = { ...options, fingerprint: "f".repeat(100) };
  const claim = await store.claim("a".repeat(100), long);
  assert.ok(claim.state === "acquired");
  await store.complete("a".repeat(100), claim.token, record(10));
  await store.claim("b", options);
  assert.ok(store.bytes > 0);
  assert.equal(await store.forget("a".repeat(100)), "deleted");
  assert.equal(await store.forget("b"), "deleted");
  assert.equal(store.size, 0);
  assert.equal(store.bytes, 0);
  // Both rooms are free again: two live claims fit, a third is refused.
  await store.claim("c", options);
  await store.claim("d", options);
  await assert.rejects(() => store.claim("e", options), StoreError);
  now += options.ttlMs;
  assert.equal(await store.forget("c"), "absent", "an expired record");
  assert.equal(store.size, 1);
});
