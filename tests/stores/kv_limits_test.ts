// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore's documented numbers at their boundaries: the 60 KiB inline
 * budget, 64 KiB chunks, 16 retries of a moved record, 10 attempts on a
 * locked database, the TTL against the lease, chunks outliving their record
 * by a minute, reads of 10 keys 8 at a time, and `waitForChange()` at the
 * lease's last millisecond. The rest of KvStore is in `kv_test.ts`.
 *
 * Run with `--unstable-kv --allow-read --allow-write --allow-env`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../../src/stores/kv.ts";
import { StoreError } from "../../src/store.ts";
import type { StoredResponse } from "../../src/store.ts";
import { pattern } from "../_support/bytes.ts";
import {
  encoder,
  keysUnder,
  options,
  responseOf,
  spied,
  type Spy,
  tokenOf,
} from "./_kv_fixtures.ts";

Deno.test("KvStore keeps a body inline up to its budget of 60 KiB, and chunks one a byte over", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv, prefix: ["t"] });
  // The record's estimate: 256, the fingerprint "fp" (2 × 2 + 8) and the
  // token, a UUID (2 × 36 + 8), no header, then the body: 61,440 at 61,092.
  for (
    const [slot, size, chunks] of [["in", 61_092, 0], [
      "out",
      61_093,
      1,
    ]] as const
  ) {
    const token = tokenOf(await store.claim(slot, options));
    const body = pattern(size);
    const response: StoredResponse = { status: 200, headers: [], body };
    assert.equal(await store.complete(slot, token, response), "applied");
    const keys = await keysUnder(kv, ["t", "chunk", slot]);
    assert.equal(keys.length, chunks, `${slot}: ${size} bytes`);
    assert.deepEqual(responseOf(await store.claim(slot, options)).body, body);
  }
});

Deno.test("KvStore fills each chunk with up to 64 KiB of the header JSON and the body", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv, prefix: ["t"] });
  // The chunks hold "[]" (2 bytes), then the body.
  const cases = [["one", 65_534, 1], ["two", 65_535, 2]] as const;
  for (const [slot, size, chunks] of cases) {
    const token = tokenOf(await store.claim(slot, options));
    const body = pattern(size);
    const response: StoredResponse = { status: 200, headers: [], body };
    assert.equal(await store.complete(slot, token, response), "applied");
    const keys = await keysUnder(kv, ["t", "chunk", slot]);
    assert.equal(keys.length, chunks, `${slot}: ${size} bytes`);
    assert.deepEqual(responseOf(await store.claim(slot, options)).body, body);
  }
});

Deno.test("KvStore retries a record moved under it 16 times in all, then throws a StoreError", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["t"] });
  const extendMoved = async (slot: string, moves: number) => {
    const token = tokenOf(await store.claim(slot, options));
    const key = ["t", "rec", slot];
    let left = moves;
    spy.beforeCommit = async (writesRecord) => {
      if (!writesRecord || left === 0) return;
      left--;
      await kv.set(key, (await kv.get(key)).value); // same record, new versionstamp
    };
    try {
      return await store.extend(slot, token, 1_000);
    } finally {
      delete spy.beforeCommit;
    }
  };
  assert.equal(await extendMoved("a", 15), "applied");
  const error = await extendMoved("b", 16).then(() => null, (e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal(error.operation, "extend");
  assert.match(error.message, /after 16 attempts/);
});

Deno.test("KvStore waits out a locked database for 10 attempts in all, then throws a StoreError", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["t"] });
  const claimLocked = (slot: string, locked: number) => {
    spy.beforeGet = () => {
      if (locked-- > 0) throw new Error("database is locked");
    };
    return store.claim(slot, options);
  };
  tokenOf(await claimLocked("a", 9));
  const error = await claimLocked("b", 10).then(() => null, (e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.match(String(error.cause), /database is locked/);
  delete spy.beforeGet;
  tokenOf(await store.claim("b", options)); // nothing was claimed
});

Deno.test("KvStore's owner writes until the TTL ends, and is lost at it, its lease over or not", async () => {
  using kv = await Deno.openKv(":memory:");
  let now = 1_000_000;
  const store = new KvStore({ kv, clock: () => now });
  const claim = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 10_000 };
  const token = tokenOf(await store.claim("s", claim));
  now += 9_999; // the lease is long over, nobody took over, 1 ms of TTL left
  assert.equal(await store.extend("s", token, 60_000), "applied");
  now += 1; // the TTL ended exactly now
  assert.equal(await store.extend("s", token, 60_000), "lost");
  const done = { status: 200, headers: [], body: encoder.encode("x") };
  assert.equal(await store.complete("s", token, done), "lost");
  assert.equal(await store.release("s", token), "lost");
});

Deno.test("KvStore holds a claim whose lease outlives its TTL in flight until the TTL, then frees it", async () => {
  using kv = await Deno.openKv(":memory:");
  let now = 1_000_000;
  const store = new KvStore({ kv, clock: () => now });
  const claim = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 2_000 };
  tokenOf(await store.claim("s", claim));
  now += 1_500;
  assert.deepEqual(await store.claim("s", claim), {
    state: "in_flight",
    fingerprint: "fp",
    retryAfterMs: 500, // until the TTL, not the lease
  });
  now += 499;
  const last = await store.claim("s", claim);
  assert.ok(last.state === "in_flight" && last.retryAfterMs === 1);
  now += 1;
  const free = await store.claim("s", claim);
  assert.ok(free.state === "acquired" && free.recovered === false);
});

Deno.test("KvStore's chunks expire a minute after their record", async () => {
  using kv = await Deno.openKv(":memory:");
  const now = 1_000_000;
  const spy: Spy = { commits: [] };
  const store = new KvStore({ kv: spied(kv, spy), clock: () => now });
  const token = tokenOf(await store.claim("s", { ...options, ttlMs: 10_000 }));
  spy.commits.length = 0;
  const body = pattern(200_000);
  const response: StoredResponse = { status: 200, headers: [], body };
  assert.equal(await store.complete("s", token, response), "applied");
  const sets = spy.commits.flatMap((c) => c.sets);
  const chunks = sets.filter((s) => s.key.includes("chunk"));
  const records = sets.filter((s) => s.key.includes("rec"));
  assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
  assert.deepEqual(records.map((s) => s.expireIn), [10_000]);
  assert.deepEqual(new Set(chunks.map((s) => s.expireIn)), new Set([70_000]));
});

Deno.test("KvStore reads chunks 10 keys a call, 8 calls at a time", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [], reads: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["t"] });
  const token = tokenOf(await store.claim("s", options));
  // "[]" then the body: 80 chunks and 1 byte, in 81 chunks.
  const body = pattern(80 * 65_536 - 1);
  const response: StoredResponse = { status: 200, headers: [], body };
  assert.equal(await store.complete("s", token, response), "applied");
  assert.equal((await keysUnder(kv, ["t", "chunk", "s"])).length, 81);
  spy.reads!.length = 0;
  assert.deepEqual(responseOf(await store.claim("s", options)).body, body);
  assert.deepEqual(spy.reads, [10, 10, 10, 10, 10, 10, 10, 10, 1]);
  assert.equal(spy.mostReading, 8);
});

Deno.test("KvStore.waitForChange() waits on a lease with 1 ms left, not on a lease or a TTL that ended exactly now", async () => {
  using kv = await Deno.openKv(":memory:");
  let now = 1_000_000;
  const store = new KvStore({ kv, clock: () => now });
  const never = new AbortController().signal;
  const claim = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 2_000 };
  const token = tokenOf(await store.claim("lease", claim));
  now += 999; // 1 ms of lease left: the wait lasts until a change
  const waiting = store.waitForChange("lease", never);
  let changed = false;
  waiting.then(() => changed = true);
  assert.equal(await store.extend("lease", token, 1), "applied");
  await waiting;
  assert.ok(changed);
  // Nothing to wait for: it resolves at once, long before a bound that
  // only stops a wait that should not have begun.
  const atOnce = async (slot: string) => {
    const bound = AbortSignal.timeout(5_000);
    await store.waitForChange(slot, bound);
    assert.equal(bound.aborted, false, `${slot}: waited`);
  };
  now += 1; // the renewed lease ends exactly now
  await atOnce("lease");
  const long = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 1_000 };
  tokenOf(await store.claim("ttl", long));
  now += 1_000; // the TTL ended exactly now, the lease has not
  await atOnce("ttl");
});

Deno.test("KvStore.forget() deletes a chunked record with its chunks, and peek() reads a torn one as unreadable", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv, prefix: ["t"] });
  const big = {
    status: 200,
    headers: [["x-a", "1"]] as [string, string][],
    body: pattern(300_000),
  };
  const token = tokenOf(await store.claim("f", options));
  assert.equal(await store.complete("f", token, big), "applied");
  const found = await store.peek("f");
  assert.ok(found.state === "completed", JSON.stringify(found));
  assert.deepEqual([found.headerNames, found.bodyBytes], [["x-a"], 300_000]);
  // The first chunk, which holds the header list, gone: torn.
  const chunks = await keysUnder(kv, ["t", "chunk", "f"]);
  await kv.delete(chunks[0]!);
  assert.equal((await store.peek("f")).state, "unreadable");
  assert.equal(await store.forget("f"), "deleted");
  assert.deepEqual(await keysUnder(kv, ["t", "chunk"]), []);
  assert.deepEqual(await keysUnder(kv, ["t", "rec"]), []);
  assert.equal(await store.forget("f"), "absent");
});
