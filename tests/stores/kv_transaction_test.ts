// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore's unit of work: the handler's own Deno KV mutations commit in the
 * one atomic commit that completes the record, or never. One commit holds
 * both, so a process that dies before it leaves neither and one that dies
 * after it leaves both; what is tested here is every way the middleware can
 * end a request: commit, throw, not cacheable, a lost claim, a failed check
 * of the handler's, an omitted body.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency } from "../../src/idempotency.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import { KvStore } from "../../src/stores/kv.ts";
import { StoreError } from "../../src/store.ts";
import { deferred } from "../_support/time.ts";
import { post } from "../_support/http.ts";

async function orders(kv: Deno.Kv): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of kv.list({ prefix: ["orders"] })) {
    keys.push(String(entry.key[1]));
  }
  return keys;
}

function order(store: KvStore, request: Request): void {
  store.atomic(request).set(
    ["orders", request.headers.get("idempotency-key")!],
    "book",
  );
}

Deno.test("KvStore.atomic() commits the handler's mutations with the record; a retry replays", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  let runs = 0;
  const handler = idempotency((request) => {
    runs++;
    order(store, request);
    return new Response(`order ${runs}`, { status: 201 });
  }, { scope: "global", store });
  assert.equal(await (await handler(post("k1"))).text(), "order 1");
  const retry = await handler(post("k1"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(await retry.text(), "order 1");
  assert.equal(runs, 1);
  assert.deepEqual(await orders(kv), ["k1"]);
});

Deno.test("KvStore.atomic(): a throw or a response that is not cacheable commits nothing and frees the key", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  let outcome: "throw" | 400 | 201 = "throw";
  const handler = idempotency((request) => {
    order(store, request);
    if (outcome === "throw") throw new Error("boom");
    return new Response(null, { status: outcome });
  }, { scope: "global", store });
  await assert.rejects(async () => await handler(post("k1")), /boom/);
  assert.deepEqual(await orders(kv), []);
  outcome = 400;
  assert.equal((await handler(post("k1"))).status, 400);
  assert.deepEqual(await orders(kv), []);
  outcome = 201;
  assert.equal((await handler(post("k1"))).status, 201);
  assert.deepEqual(await orders(kv), ["k1"]);
});

Deno.test("KvStore.atomic(): a claim taken over before the commit commits nothing of the first owner's and answers it 409", async () => {
  using kv = await Deno.openKv(":memory:");
  let now = 1_000_000;
  const store = new KvStore({ kv, clock: () => now });
  const inside = deferred();
  const go = deferred();
  const events: IdempotencyEvent[] = [];
  let runs = 0;
  const handler = idempotency(async (request) => {
    const run = ++runs;
    store.atomic(request).set(["orders", `run ${run}`], run);
    if (run === 1) {
      inside.resolve();
      await go.promise;
    }
    return new Response(`run ${run}`, { status: 201 });
  }, {
    scope: "global",
    store,
    lease: 60_000,
    onEvent: (event) => events.push(event),
  });
  const first = handler(post("k1"));
  await inside.promise;
  now += 61_000; // the first owner's lease ran out
  const second = await handler(post("k1"));
  assert.equal(await second.text(), "run 2");
  go.resolve();
  const answer = await first;
  assert.equal(answer.status, 409);
  assert.deepEqual(await orders(kv), ["run 2"]);
  assert.ok(
    events.some((e) => e.type === "completed" && e.outcome === "lost"),
  );
  const replay = await handler(post("k1"));
  assert.equal(await replay.text(), "run 2");
});

Deno.test("KvStore.atomic(): a failed check of the handler's commits nothing, answers 503, and the retry runs", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  await kv.set(["stock"], 1);
  let runs = 0;
  const handler = idempotency(async (request) => {
    runs++;
    const stock = await kv.get<number>(["stock"]);
    if (runs === 1) await kv.set(["stock"], 5); // a concurrent writer
    store.atomic(request).check(stock).set(["stock"], stock.value! - 1);
    order(store, request);
    return new Response("ok", { status: 201 });
  }, { scope: "global", store });
  assert.equal((await handler(post("k1"))).status, 503);
  assert.deepEqual(await orders(kv), []);
  assert.equal((await kv.get(["stock"])).value, 5);
  const retry = await handler(post("k1"));
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get("idempotent-replayed"), null);
  assert.equal((await kv.get(["stock"])).value, 4);
  assert.deepEqual(await orders(kv), ["k1"]);
});

Deno.test("KvStore.atomic(): a body over maxResponseBytes is recorded without it, in the commit that holds the mutations", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  const big = "x".repeat(5000);
  const handler = idempotency((request) => {
    order(store, request);
    return new Response(big, { status: 201 });
  }, { scope: "global", store, maxResponseBytes: 1000 });
  assert.equal(await (await handler(post("k1"))).text(), big);
  const retry = await handler(post("k1"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(await retry.text(), "");
  assert.deepEqual(await orders(kv), ["k1"]);
});

Deno.test("KvStore.atomic() refuses a request its middleware did not claim", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  assert.throws(() => store.atomic(post("k1")), TypeError);
});

/**
 * A database whose next commit first runs `before` (once), as a concurrent
 * writer between the store's read and its commit would.
 */
function interposed(kv: Deno.Kv): {
  kv: Deno.Kv;
  next(before: () => Promise<unknown>): void;
} {
  let pending: (() => Promise<unknown>) | null = null;
  const wrapped = {
    get: (key: Deno.KvKey) => kv.get(key),
    getMany: (keys: Deno.KvKey[]) => kv.getMany(keys),
    list: (selector: Deno.KvListSelector) => kv.list(selector),
    atomic: () => {
      const op = kv.atomic();
      const commit = op.commit.bind(op);
      op.commit = async () => {
        const before = pending;
        pending = null;
        await before?.();
        return await commit();
      };
      return op;
    },
  } as unknown as Deno.Kv;
  return { kv: wrapped, next: (before) => void (pending = before) };
}

const claimOptions = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 60_000 };
const done = { status: 201, headers: [], body: new Uint8Array([1]) };

/** A claimed unit of work whose mutations check `["stock"]` as read now. */
async function checkedUnit(store: KvStore, kv: Deno.Kv, slot: string) {
  const claim = await store.claim(slot, claimOptions);
  if (claim.state !== "acquired") throw new Error(claim.state);
  const request = post(slot);
  const unit = store.unitOfWork(request, slot, claim.token);
  const stock = await kv.get<number>(["stock"]);
  store.atomic(request).check(stock).set(["orders", slot], "book");
  return { unit, token: claim.token };
}

Deno.test("KvStore.atomic(): a record its owner's extend moved before the commit still commits, checks and all", async () => {
  using db = await Deno.openKv(":memory:");
  await db.set(["stock"], 1);
  const { kv, next } = interposed(db);
  const store = new KvStore({ kv });
  const { unit, token } = await checkedUnit(store, db, "s");
  next(() => store.extend("s", token, 5_000));
  assert.equal(await unit.commit(done), "committed");
  assert.deepEqual(await orders(db), ["s"]);
  assert.equal((await store.claim("s", claimOptions)).state, "completed");
});

Deno.test("KvStore.atomic(): a record taken over before the commit is lost, not a failed check", async () => {
  using db = await Deno.openKv(":memory:");
  await db.set(["stock"], 1);
  let now = 1_000_000;
  const { kv, next } = interposed(db);
  const store = new KvStore({ kv, clock: () => now });
  const { unit } = await checkedUnit(store, db, "s");
  next(async () => {
    now += claimOptions.leaseMs; // the lease ran out: another takes the slot
    const other = await store.claim("s", claimOptions);
    assert.equal(other.state, "acquired");
  });
  assert.equal(await unit.commit(done), "lost");
  assert.deepEqual(await orders(db), []);
});

Deno.test("KvStore.atomic(): a failed check of the handler's throws, and the claim stays its owner's", async () => {
  using db = await Deno.openKv(":memory:");
  await db.set(["stock"], 1);
  const { kv, next } = interposed(db);
  const store = new KvStore({ kv });
  const { unit, token } = await checkedUnit(store, db, "s");
  next(() => db.set(["stock"], 5)); // a concurrent writer of the handler's key
  const error = await unit.commit(done).then(() => null, (e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.match(String(error.cause ?? error.message), /check of the handler's/);
  assert.deepEqual(await orders(db), []);
  assert.equal(await store.extend("s", token, 1_000), "applied");
});
