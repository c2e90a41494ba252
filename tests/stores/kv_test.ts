// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore: the store conformance suite on an in-memory and a file database,
 * and what only Deno KV has: chunked bodies, torn chunk sets, cleanup of
 * chunks, `expireIn` recomputed from the deadline, persistence across
 * restarts and claims from two processes' worth of handles on one file.
 * Its documented numbers at their boundaries are in `kv_limits_test.ts`;
 * the helpers both share in `_kv_fixtures.ts`.
 *
 * Run with `--unstable-kv --allow-read --allow-write --allow-env`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../../src/stores/kv.ts";
import { StoreError } from "../../src/store.ts";
import type { StoredResponse } from "../../src/store.ts";
import { storeConformance } from "../../src/testing/testing.ts";
import type {
  ConformanceHarness,
  PoisonKind,
} from "../../src/testing/testing.ts";
import { uniquePrefix } from "../_support/services.ts";
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

/** A clock that tests move forward by hand. */
function fakeClock(): { clock: () => number; elapse(ms: number): void } {
  let offset = 0;
  return {
    clock: () => Date.now() + offset,
    elapse: (ms) => {
      offset += ms;
    },
  };
}

function poisonValue(kind: PoisonKind): unknown {
  switch (kind) {
    case "garbage":
      return crypto.getRandomValues(new Uint8Array(40));
    case "truncated":
      // A record cut short: no lease, no deadline.
      return { v: 1, state: "completed", fp: "p", tok: "t" };
    case "future_version":
      // Would be taken over if read as a version 1 record: its lease is over.
      return {
        v: 2,
        state: "in_flight",
        fp: "p",
        token: "t",
        leaseUntil: 0,
        deadline: Date.now() + 3_600_000,
      };
  }
}

function harness(
  kv: Deno.Kv,
  cleanup: () => Promise<void>,
): ConformanceHarness {
  // Time moves only when the suite moves it, so that it can step onto the
  // exact end of a lease.
  let now = Date.now();
  const advance = (ms: number) => Promise.resolve(void (now += ms));
  const prefix = [uniquePrefix("kv_conf")];
  return {
    store: new KvStore({ kv, prefix, clock: () => now }),
    elapse: advance,
    advanceClock: advance,
    poison: async (slot, kind) => {
      await kv.set([...prefix, "rec", slot], poisonValue(kind));
    },
    teardown: async () => {
      kv.close();
      await cleanup();
    },
  };
}

storeConformance({
  name: "KvStore (:memory:)",
  setup: async () => harness(await Deno.openKv(":memory:"), async () => {}),
});

storeConformance({
  name: "KvStore (file)",
  setup: async () => {
    const path = await Deno.makeTempFile({ suffix: ".kv" });
    return harness(await Deno.openKv(path), () => removeDb(path));
  },
});

/** Removes a database file and SQLite's companions of it. */
async function removeDb(path: string): Promise<void> {
  for (const suffix of ["", "-wal", "-shm", "-journal"]) {
    await Deno.remove(path + suffix).catch(() => {});
  }
}

Deno.test("KvStore round-trips a 1 MiB body written over several commits", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["t"] });
  const token = tokenOf(await store.claim("big", options));
  const body = pattern(1_048_576);
  const response: StoredResponse = {
    status: 200,
    headers: [["content-type", "application/octet-stream"]],
    body,
  };
  spy.commits.length = 0;
  assert.equal(await store.complete("big", token, response), "applied");
  const chunkCommits = spy.commits.filter((c) =>
    c.sets.some((s) => s.key[1] === "chunk")
  );
  assert.ok(chunkCommits.length >= 2, `${chunkCommits.length} chunk commits`);
  assert.equal(spy.commits.length, chunkCommits.length + 1);
  const chunks = await keysUnder(kv, ["t", "chunk", "big", token]);
  assert.ok(chunks.length >= 16, `${chunks.length} chunks`);
  const replay = responseOf(await store.claim("big", options));
  assert.deepEqual(replay.headers, response.headers);
  assert.deepEqual(replay.body, body);
});

Deno.test("KvStore round-trips a header list larger than one value", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  const headers = Array.from(
    { length: 400 },
    (_, i) => ["set-cookie", `c${i}=${"é".repeat(200)}`] as [string, string],
  );
  for (const body of [encoder.encode("small"), null]) {
    const slot = body === null ? "omitted" : "small";
    const token = tokenOf(await store.claim(slot, options));
    const response: StoredResponse = body === null
      ? { status: 200, headers, body: null, omitted: "too_large" }
      : { status: 200, headers, body };
    assert.equal(await store.complete(slot, token, response), "applied");
    const replay = responseOf(await store.claim(slot, options));
    assert.deepEqual(replay, response);
  }
});

Deno.test("KvStore reads a torn chunk set as in flight until the record's deadline", async () => {
  using kv = await Deno.openKv(":memory:");
  const time = fakeClock();
  const store = new KvStore({ kv, prefix: ["t"], clock: time.clock });
  const token = tokenOf(
    await store.claim("torn", { ...options, ttlMs: 10_000 }),
  );
  assert.equal(
    await store.complete("torn", token, {
      status: 200,
      headers: [],
      body: pattern(300_000),
    }),
    "applied",
  );
  const chunks = await keysUnder(kv, ["t", "chunk", "torn"]);
  assert.ok(chunks.length > 2);
  await kv.delete(chunks[2]!);
  for (let i = 0; i < 2; i++) {
    const seen = await store.claim("torn", options);
    assert.equal(seen.state, "in_flight");
    if (seen.state === "in_flight") {
      assert.equal(seen.fingerprint, null);
      assert.ok(seen.retryAfterMs >= 1);
    }
  }
  time.elapse(5_000);
  assert.equal((await store.claim("torn", options)).state, "in_flight");
  time.elapse(5_001);
  const after = await store.claim("torn", options);
  assert.equal(after.state, "acquired");
  if (after.state === "acquired") assert.equal(after.recovered, false);
  assert.deepEqual(
    await keysUnder(kv, ["t", "chunk", "torn", token]),
    [],
    "the expired record's chunks were removed",
  );
});

Deno.test("KvStore reads a damaged chunk value as in flight", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv, prefix: ["t"] });
  const token = tokenOf(await store.claim("bad", options));
  await store.complete("bad", token, {
    status: 200,
    headers: [],
    body: pattern(200_000),
  });
  const chunks = await keysUnder(kv, ["t", "chunk", "bad"]);
  await kv.set(chunks[1]!, "not bytes");
  const seen = await store.claim("bad", options);
  assert.equal(seen.state, "in_flight");
  if (seen.state === "in_flight") assert.equal(seen.fingerprint, null);
});

Deno.test("KvStore deletes its chunks when the completing flip is lost", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["t"] });
  const token = tokenOf(await store.claim("lost", options));
  spy.commits.length = 0;
  // The record vanishes (as by Deno KV's expiry) between the chunk commits
  // and the flip.
  spy.beforeCommit = async (writesRecord) => {
    if (writesRecord) await kv.delete(["t", "rec", "lost"]);
  };
  const outcome = await store.complete("lost", token, {
    status: 200,
    headers: [],
    body: pattern(1_048_576),
  });
  assert.equal(outcome, "lost");
  const flip = spy.commits.findIndex((c) =>
    c.sets.some((s) => s.key.includes("rec"))
  );
  assert.equal(flip, 2, "two chunk commits, then the flip");
  assert.deepEqual(await keysUnder(kv, ["t", "chunk"]), []);
  assert.equal((await store.claim("lost", options)).state, "acquired");
});

Deno.test("KvStore removes the old owner's chunks when a takeover beats its flip", async () => {
  using kv = await Deno.openKv(":memory:");
  const time = fakeClock();
  const spy: Spy = { commits: [] };
  const prefix = ["t"];
  const slow = new KvStore({ kv: spied(kv, spy), prefix, clock: time.clock });
  const fast = new KvStore({ kv, prefix, clock: time.clock });
  const stale = tokenOf(await slow.claim("race", options));
  spy.commits.length = 0;
  spy.beforeCommit = async (writesRecord) => {
    if (!writesRecord) return;
    time.elapse(options.leaseMs + 1);
    const takeover = await fast.claim("race", { ...options, fingerprint: "b" });
    assert.equal(takeover.state, "acquired");
    if (takeover.state === "acquired") assert.equal(takeover.recovered, true);
  };
  const outcome = await slow.complete("race", stale, {
    status: 200,
    headers: [],
    body: pattern(1_048_576),
  });
  assert.equal(outcome, "lost");
  assert.deepEqual(await keysUnder(kv, ["t", "chunk"]), []);
  const seen = await fast.claim("race", options);
  assert.equal(seen.state, "in_flight");
  if (seen.state === "in_flight") assert.equal(seen.fingerprint, "b");
});

Deno.test("KvStore release removes the chunks a failed completion left", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["t"] });
  const token = tokenOf(await store.claim("rel", options));
  spy.commits.length = 0;
  spy.beforeCommit = (writesRecord) =>
    writesRecord
      ? Promise.reject(new Error("network down"))
      : Promise.resolve();
  const error = await store.complete("rel", token, {
    status: 200,
    headers: [],
    body: pattern(500_000),
  }).then(() => null, (e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal(error.operation, "complete");
  assert.equal((error.cause as Error).message, "network down");
  delete spy.beforeCommit;
  assert.ok((await keysUnder(kv, ["t", "chunk", "rel", token])).length > 0);
  assert.equal(await store.release("rel", token), "applied");
  assert.deepEqual(await keysUnder(kv, ["t", "chunk"]), []);
  assert.equal((await store.claim("rel", options)).state, "acquired");
});

Deno.test("KvStore keeps the first claim's deadline across extend and complete, recomputing expireIn", async () => {
  using kv = await Deno.openKv(":memory:");
  const time = fakeClock();
  const spy: Spy = { commits: [] };
  const store = new KvStore({
    kv: spied(kv, spy),
    prefix: ["t"],
    clock: time.clock,
  });
  const ttlMs = 10_000;
  const token = tokenOf(await store.claim("ttl", { ...options, ttlMs }));
  const claimed = await kv.get<{ deadline: number }>(["t", "rec", "ttl"]);
  const deadline = claimed.value!.deadline;
  const expiries = () => spy.commits.at(-1)!.sets.map((s) => s.expireIn!);
  assert.ok(Math.abs(expiries()[0]! - ttlMs) <= 1);

  time.elapse(3_000);
  assert.equal(await store.extend("ttl", token, 1_000), "applied");
  const extendIn = expiries()[0]!;
  assert.ok(Math.abs(extendIn - 7_000) <= 50, `extend expireIn ${extendIn}`);

  time.elapse(3_000);
  assert.equal(
    await store.complete("ttl", token, {
      status: 200,
      headers: [],
      body: pattern(200_000),
    }),
    "applied",
  );
  const flip = spy.commits.at(-1)!.sets;
  assert.equal(flip.length, 1);
  assert.deepEqual(flip[0]!.key, ["t", "rec", "ttl"]);
  assert.ok(
    Math.abs(flip[0]!.expireIn! - 4_000) <= 50,
    `flip expireIn ${flip[0]!.expireIn}`,
  );
  const chunkSets = spy.commits.slice(-2, -1)[0]!.sets;
  assert.ok(
    chunkSets.every((s) => s.expireIn! >= flip[0]!.expireIn!),
    "chunks outlive their record",
  );
  const done = await kv.get<{ deadline: number; state: string }>([
    "t",
    "rec",
    "ttl",
  ]);
  assert.equal(done.value!.state, "completed");
  assert.equal(done.value!.deadline, deadline);

  time.elapse(3_900);
  assert.equal((await store.claim("ttl", options)).state, "completed");
  time.elapse(101);
  assert.equal((await store.claim("ttl", options)).state, "acquired");
});

Deno.test("KvStore records survive a restart on the same file", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  try {
    const body = pattern(700_000);
    const first = await Deno.openKv(path);
    let token: string;
    try {
      const store = new KvStore({ kv: first });
      token = tokenOf(await store.claim("done", options));
      assert.equal(
        await store.complete("done", token, {
          status: 201,
          headers: [["x-a", "1"]],
          body,
        }),
        "applied",
      );
      tokenOf(await store.claim("open", { ...options, fingerprint: "o" }));
    } finally {
      first.close();
    }
    using second = await Deno.openKv(path);
    const store = new KvStore({ kv: second });
    const replay = responseOf(await store.claim("done", options));
    assert.equal(replay.status, 201);
    assert.deepEqual(replay.headers, [["x-a", "1"]]);
    assert.deepEqual(replay.body, body);
    const open = await store.claim("open", options);
    assert.equal(open.state, "in_flight");
    if (open.state === "in_flight") assert.equal(open.fingerprint, "o");
    assert.equal(await store.release("done", token), "lost");
  } finally {
    await removeDb(path);
  }
});

Deno.test("KvStore claims from two handles on one file have exactly one winner", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  try {
    using a = await Deno.openKv(path);
    using b = await Deno.openKv(path);
    const stores = [new KvStore({ kv: a }), new KvStore({ kv: b })];
    for (let round = 0; round < 5; round++) {
      const slot = `race-${round}`;
      const results = await Promise.all(
        Array.from(
          { length: 20 },
          (_, i) =>
            stores[i % 2]!.claim(slot, { ...options, fingerprint: `f${i}` }),
        ),
      );
      const winners = results.flatMap((r, i) =>
        r.state === "acquired" ? [i] : []
      );
      assert.equal(winners.length, 1, `round ${round}: ${winners}`);
      for (const r of results) {
        if (r.state === "in_flight") {
          assert.equal(r.fingerprint, `f${winners[0]}`);
        }
      }
    }
  } finally {
    await removeDb(path);
  }
});

Deno.test("KvStore throws StoreError with the cause when the database is closed", async () => {
  const kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  const token = tokenOf(await store.claim("s", options));
  kv.close();
  const attempts: [string, () => Promise<unknown>][] = [
    ["claim", () => store.claim("s", options)],
    [
      "complete",
      () =>
        store.complete("s", token, {
          status: 200,
          headers: [],
          body: null,
          omitted: "cancelled",
        }),
    ],
    ["release", () => store.release("s", token)],
    ["extend", () => store.extend("s", token, 1_000)],
  ];
  for (const [operation, attempt] of attempts) {
    const error = await attempt().then(() => null, (e) => e);
    assert.ok(error instanceof StoreError, `${operation}: ${error}`);
    assert.equal(error.operation, operation);
    assert.ok(error.cause !== undefined);
  }
});

Deno.test("KvStore validates its options and arguments eagerly", async () => {
  using kv = await Deno.openKv(":memory:");
  assert.throws(
    () => new KvStore({ kv: {} as Deno.Kv }),
    TypeError,
  );
  assert.throws(
    () => new KvStore({ kv, prefix: "x" as unknown as Deno.KvKey }),
    TypeError,
  );
  const store = new KvStore({ kv });
  await assert.rejects(
    () => store.claim("s", { ...options, leaseMs: 0 }),
    RangeError,
  );
  await assert.rejects(
    () => store.claim("s", { ...options, ttlMs: Number.NaN }),
    RangeError,
  );
  await assert.rejects(() => store.extend("s", "t", -1), RangeError);
  await assert.rejects(
    () => store.complete("s", "t", { status: 99, headers: [], body: null }),
    TypeError,
  );
});

Deno.test("KvStore reads a record whose chunk count does not follow from its lengths as in flight, reading no chunk", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [], reads: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["n"] });
  const token = tokenOf(await store.claim("count", options));
  const body = pattern(200_000);
  assert.equal(
    await store.complete("count", token, { status: 200, headers: [], body }),
    "applied",
  );
  const key = ["n", "rec", "count"];
  const record = (await kv.get<Record<string, unknown>>(key)).value!;
  assert.equal(typeof record.chunks, "number");
  await kv.set(key, { ...record, chunks: 1_000_000_000 }); // damaged: no reader may fetch that many keys
  spy.reads!.length = 0;
  const seen = await store.claim("count", options);
  assert.equal(seen.state, "in_flight");
  if (seen.state === "in_flight") assert.equal(seen.fingerprint, null);
  assert.deepEqual(
    spy.reads,
    [],
    "the record is refused before any chunk read",
  );
});

Deno.test("KvStore reads only what is stored of a record that claims a huge body", async () => {
  using kv = await Deno.openKv(":memory:");
  const spy: Spy = { commits: [], reads: [] };
  const store = new KvStore({ kv: spied(kv, spy), prefix: ["h"] });
  const token = tokenOf(await store.claim("huge", options));
  const body = pattern(200_000);
  assert.equal(
    await store.complete("huge", token, { status: 200, headers: [], body }),
    "applied",
  );
  const key = ["h", "rec", "huge"];
  const record = (await kv.get<Record<string, unknown>>(key)).value!;
  // Consistent counts, but 2^36 bytes that were never written: a hostile or
  // damaged value that passes every check on the record itself.
  const bodyLength = 2 ** 36;
  await kv.set(key, {
    ...record,
    bodyLength,
    chunks: Math.ceil(((record.headersLength as number) + bodyLength) / 65_536),
  });
  spy.reads!.length = 0;
  const seen = await store.claim("huge", options);
  assert.equal(seen.state, "in_flight");
  if (seen.state === "in_flight") assert.equal(seen.fingerprint, null);
  const keysRead = spy.reads!.reduce((a, b) => a + b, 0);
  assert.ok(
    keysRead <= 80,
    `${keysRead} chunk keys read for 4 stored chunks: the read must stop at the first missing one`,
  );
});
