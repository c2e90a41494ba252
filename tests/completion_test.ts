// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The terminal rule under a failing store: a completion write that throws is
 * retried (the lease renewed meanwhile) until it lands or is fenced out,
 * inline and then in the background, so that a retry of the request replays
 * instead of running the handler again. Time in the store is an injected
 * clock; the tests wait for events and store calls, never for a duration.
 * The same on a real RedisStore and PostgresStore is in
 * `completion_stores_test.ts`; the faulty store both use in
 * `_completion_fixtures.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  drainCompletions,
  idempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  slotOf,
} from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { bytesOf, pattern, sameBytes } from "./_support/bytes.ts";
import { deferred, FakeClock } from "./_support/time.ts";
import { post } from "./_support/http.ts";
import { type Fault, FlakyStore, Watch } from "./_completion_fixtures.ts";
import { idempotencyOn } from "./_support/idempotency.ts";

/** A MemoryStore on a clock the test moves, behind a FlakyStore. */
function setup(options: Partial<IdempotencyOptions> = {}, clock?: FakeClock) {
  let now = 1_000_000;
  const memory = new MemoryStore({ clock: () => now });
  const store = new FlakyStore(memory);
  const events: IdempotencyEvent[] = [];
  const watch = new Watch();
  let runs = 0;
  const body = pattern(3000, 41);
  const t = {
    hold: undefined as (() => Promise<void>) | undefined,
    status: () => 201,
  };
  const handler = async () => {
    runs++;
    await t.hold?.();
    return new Response(body, { status: t.status() });
  };
  const checked: IdempotencyOptions = {
    scope: "global",
    store,
    lease: 1000,
    onEvent: (event) => {
      events.push(event);
      watch.notify();
    },
    ...options,
  };
  const guarded = clock
    ? idempotencyOn(clock, handler, checked)
    : idempotency(handler, checked);
  return Object.assign(t, {
    memory,
    store,
    events,
    guarded,
    body,
    runs: () => runs,
    advance: (ms: number) => now += ms,
    until: (check: (events: IdempotencyEvent[]) => boolean) =>
      watch.until(() => check(events)),
    completed: (slot: string) =>
      events.filter((
        e,
      ): e is Extract<IdempotencyEvent, { type: "completed" }> =>
        e.type === "completed" && e.slot === slot
      ),
  });
}

Deno.test("idempotency() retries a completion that fails once: a retry after the lease replays", async () => {
  const t = setup();
  t.store.faults.complete = (_slot, n) => n === 1 ? "throw" : "pass";
  const first = await t.guarded(post("once"));
  assert.equal(first.status, 201);
  assert.ok(sameBytes(await bytesOf(first), t.body));
  t.advance(1100); // the lease (1000) has run out
  const retry = await t.guarded(post("once"));
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.ok(sameBytes(await bytesOf(retry), t.body));
  assert.equal(t.runs(), 1);
  const [done] = t.completed(slotOf("", "once"));
  assert.equal(done?.outcome, "applied");
  assert.equal(done?.attempts, 2);
  assert.equal(done?.background, false);
});

Deno.test("idempotency() retries a completion that fails n times, inline, then replays", async () => {
  const t = setup();
  t.store.faults.complete = (_slot, n) => n <= 4 ? "throw" : "pass";
  const first = await t.guarded(post("four"));
  assert.equal(first.status, 201);
  assert.ok(sameBytes(await bytesOf(first), t.body));
  const slot = slotOf("", "four");
  assert.equal(t.store.count("complete", slot), 5);
  const retries = t.events.filter((e) =>
    e.type === "write_retry" && e.slot === slot
  );
  assert.deepEqual(
    retries.map((e) => e.type === "write_retry" && [e.attempt, e.operation]),
    [[2, "complete"], [3, "complete"], [4, "complete"], [5, "complete"]],
  );
  assert.equal(
    t.events.filter((e) => e.type === "store_error").length,
    4,
  );
  assert.equal(t.completed(slot)[0]?.attempts, 5);
  t.advance(1100);
  const retry = await t.guarded(post("four"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  await retry.body?.cancel();
  assert.equal(t.runs(), 1);
});

Deno.test("idempotency() replays after a completion that landed but threw", async () => {
  const t = setup();
  t.store.faults.complete = (_slot, n) => n === 1 ? "after" : "pass";
  await (await t.guarded(post("landed"))).body?.cancel();
  t.advance(1100);
  const retry = await t.guarded(post("landed"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.ok(sameBytes(await bytesOf(retry), t.body));
  assert.equal(t.runs(), 1);
  // The retried write finds the record there and is fenced out.
  assert.equal(t.completed(slotOf("", "landed"))[0]?.outcome, "lost");
});

Deno.test("idempotency() sends the real bytes once the inline budget is spent, and completes in the background", async () => {
  const t = setup({ completionWait: 30 });
  const slot = slotOf("", "slow");
  let down = true;
  t.store.faults.complete = () => down ? "throw" : "pass";
  const first = await t.guarded(post("slow"));
  assert.equal(first.status, 201);
  assert.ok(sameBytes(await bytesOf(first), t.body));
  assert.ok(t.store.count("complete", slot) >= 2, "retried inline first");
  assert.deepEqual(t.completed(slot), [], "still pending");
  // Meanwhile the slot stays claimed: a retry waits, it does not run.
  const meanwhile = await t.guarded(post("slow"));
  assert.equal(meanwhile.status, 409);
  await meanwhile.body?.cancel();
  await t.until((events) =>
    events.some((e) =>
      e.type === "write_retry" && e.slot === slot && e.background
    )
  );
  down = false;
  await drainCompletions(t.guarded);
  const [done] = t.completed(slot);
  assert.equal(done?.outcome, "applied");
  assert.equal(done?.background, true);
  t.advance(1100);
  const retry = await t.guarded(post("slow"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.ok(sameBytes(await bytesOf(retry), t.body));
  assert.equal(t.runs(), 1);
});

Deno.test("idempotency() stops retrying a completion once it is fenced out (lost)", async () => {
  const t = setup({ completionWait: 0 });
  const slot = slotOf("", "fenced");
  const gate = deferred();
  t.store.faults.complete = async (_slot, n) => {
    if (n === 1) return "throw";
    await gate.promise;
    return "pass";
  };
  await (await t.guarded(post("fenced"))).body?.cancel();
  // The lease runs out and another owner takes the slot over.
  t.advance(1100);
  const other = await t.memory.claim(slot, {
    fingerprint: "other",
    leaseMs: 1000,
    ttlMs: 60_000,
  });
  assert.equal(other.state, "acquired");
  await t.store.watch.until(() => t.store.count("complete", slot) === 2);
  gate.resolve();
  await drainCompletions(t.guarded);
  const [done] = t.completed(slot);
  assert.equal(done?.outcome, "lost");
  assert.equal(done?.attempts, 2);
  assert.equal(t.store.count("complete", slot), 2, "no attempt after lost");
});

Deno.test("idempotency() gives a completion up after completionTimeout", async () => {
  const t = setup({ completionWait: 0, completionTimeout: 40 });
  const slot = slotOf("", "never");
  t.store.faults.complete = () => "throw";
  const first = await t.guarded(post("never"));
  assert.ok(sameBytes(await bytesOf(first), t.body));
  await drainCompletions(t.guarded);
  const [done] = t.completed(slot);
  assert.equal(done?.outcome, "unknown");
  assert.equal(t.store.count("complete", slot), done?.attempts);
});

Deno.test("idempotency() holds a response past maxPendingCompletions until a background completion ends", async () => {
  const t = setup({ completionWait: 0, maxPendingCompletions: 1 });
  const a = slotOf("", "a");
  const b = slotOf("", "b");
  const down = new Set([a, b]);
  t.store.faults.complete = (slot) => down.has(slot) ? "throw" : "pass";
  const first = await t.guarded(post("a"));
  assert.ok(sameBytes(await bytesOf(first), t.body));
  let answered = false;
  const second = Promise.resolve(t.guarded(post("b"))).then((res) => {
    answered = true;
    return res;
  });
  // b keeps retrying inline: the one background place is a's.
  await t.until((events) =>
    events.some((e) =>
      e.type === "write_retry" && e.slot === b && e.attempt >= 3
    )
  );
  assert.equal(answered, false);
  assert.ok(
    t.events.every((e) =>
      !(e.type === "write_retry" && e.slot === b) || !e.background
    ),
  );
  down.delete(a);
  // a lands, its place frees, b goes to the background and is answered.
  const res = await second;
  assert.ok(sameBytes(await bytesOf(res), t.body));
  assert.equal(t.completed(a)[0]?.outcome, "applied");
  down.delete(b);
  await drainCompletions(t.guarded);
  assert.equal(t.completed(b)[0]?.outcome, "applied");
  assert.equal(t.completed(b)[0]?.background, true);
  t.advance(1100);
  for (const key of ["a", "b"]) {
    const retry = await t.guarded(post(key));
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    await retry.body?.cancel();
  }
  assert.equal(t.runs(), 2);
});

Deno.test("idempotency() renews the lease while a completion is pending, and stops at its outcome", async () => {
  // A real-time heartbeat: with a lease of 60 ms a claim is renewed every
  // 20–30 ms. Claims on one middleware share one timer: once a second claim
  // has been renewed twice, any beat still in the list was due as well.
  const t = setup({ completionWait: 0, lease: 60 });
  const slot = slotOf("", "beat");
  let down = true;
  t.store.faults.complete = (s) => s === slot && down ? "throw" : "pass";
  const renewedTwice = async (key: string) => {
    const watched = slotOf("", key);
    t.hold = () =>
      t.store.watch.until(() => t.store.count("extend", watched) >= 2);
    // The heartbeat's timer does not keep the process alive; a server would.
    const alive = setInterval(() => {}, 1000);
    try {
      await (await t.guarded(post(key))).body?.cancel();
    } finally {
      clearInterval(alive);
      t.hold = undefined;
    }
  };
  await (await t.guarded(post("beat"))).body?.cancel();
  assert.deepEqual(t.completed(slot), [], "pending in the background");
  // While the write is pending, the claim is renewed.
  await renewedTwice("sentinel-1");
  assert.ok(t.store.count("extend", slot) >= 1, "renewed while pending");
  down = false;
  await drainCompletions(t.guarded);
  assert.equal(t.completed(slot)[0]?.outcome, "applied");
  const renewed = t.store.count("extend", slot);
  await renewedTwice("sentinel-2");
  assert.equal(t.store.count("extend", slot), renewed, "no renewal after");
});

Deno.test("idempotency() retries a failed release in the background, so that a retry runs at once", async () => {
  const t = setup();
  const slot = slotOf("", "rel");
  t.store.faults.release = (_slot, n) => n === 1 ? "throw" : "pass";
  let status = 503;
  t.status = () => status;
  const first = await t.guarded(post("rel"));
  assert.equal(first.status, 503);
  await first.body?.cancel();
  await drainCompletions(t.guarded);
  const released = t.events.filter((e) => e.type === "released");
  assert.equal(released.length, 1);
  assert.equal(
    released[0]?.type === "released" && released[0].outcome,
    "applied",
  );
  assert.equal(released[0]?.type === "released" && released[0].attempts, 2);
  status = 201;
  const retry = await t.guarded(post("rel"));
  assert.equal(retry.status, 201, "no 409: the slot was freed");
  await retry.body?.cancel();
  assert.equal(t.runs(), 2);
  assert.equal(t.store.count("release", slot), 2);
});

Deno.test("idempotency() checks the completion options eagerly", async () => {
  const ok = () => new Response("ok");
  assert.throws(
    () => idempotency(ok, { scope: "global", completionWait: -1 }),
    RangeError,
    "'completionWait' must be a non-negative integer: current value is -1",
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", completionTimeout: 0 }),
    RangeError,
    "'completionTimeout' must be a positive integer: current value is 0",
  );
  assert.throws(
    () =>
      idempotency(ok, {
        scope: "global",
        completionWait: 20,
        completionTimeout: 10,
      }),
    RangeError,
    "'completionWait' must not exceed 'completionTimeout' (10): current value is 20",
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", maxPendingCompletions: 1.5 }),
    RangeError,
    "'maxPendingCompletions' must be a non-negative integer: current value is 1.5",
  );
  await assert.rejects(
    () => drainCompletions(ok),
    TypeError,
    "'handler' must be a handler returned by idempotency()",
  );
});

/** On a real store: a completion that fails once is retried, and a retry at once replays (not 409, not a second run). */
async function atCeiling(fn: () => Promise<void>): Promise<void> {
  const random = Math.random;
  Math.random = () => 1 - 1e-9;
  try {
    await fn();
  } finally {
    Math.random = random;
  }
}

/** The `[outcome, attempts]` of each `released` event. */
function releases(events: IdempotencyEvent[]) {
  return events.flatMap((e) =>
    e.type === "released" ? [[e.outcome, e.attempts]] : []
  );
}

/** The `delayMs` of each `write_retry` of `slot`. */
function retryDelays(events: IdempotencyEvent[], slot: string) {
  return events.flatMap((e) =>
    e.type === "write_retry" && e.slot === slot ? [e.delayMs] : []
  );
}

Deno.test("completion retries a failing release exactly 4 times", async () => {
  for (
    const [failures, outcome] of [[3, "applied"], [4, "unknown"], [
      5,
      "unknown",
    ]] as const
  ) {
    const t = setup();
    const key = `release-${failures}`;
    t.store.faults.release = (_slot, n) => n <= failures ? "throw" : "pass";
    t.status = () => 503;
    await (await t.guarded(post(key))).body?.cancel();
    await drainCompletions(t.guarded);
    assert.deepEqual(releases(t.events), [[outcome, 4]], `${failures}`);
    assert.equal(t.store.count("release", slotOf("", key)), 4);
  }
});

Deno.test("completion waits at most a quarter lease between retries, when that is under 2 s", async () => {
  await atCeiling(async () => {
    const t = setup({ completionWait: 0, lease: 100 });
    const slot = slotOf("", "quarter");
    t.store.faults.complete = (_slot, n) => n <= 4 ? "throw" : "pass";
    await (await t.guarded(post("quarter"))).body?.cancel();
    await drainCompletions(t.guarded);
    assert.deepEqual(retryDelays(t.events, slot), [20, 25, 25, 25]);
    assert.equal(t.completed(slot)[0]?.outcome, "applied");
  });
});

Deno.test("completion waits at most 2 s between retries, a quarter lease being longer", async () => {
  await atCeiling(async () => {
    const time = new FakeClock(); // 4.5 s of backoff in milliseconds
    const t = setup({ completionWait: 0, lease: 10_000 }, time);
    const slot = slotOf("", "two-seconds");
    t.store.faults.complete = (_slot, n) => n <= 8 ? "throw" : "pass";
    await (await t.guarded(post("two-seconds"))).body?.cancel();
    const drained = drainCompletions(t.guarded);
    for (let n = 1; n <= 8; n++) { // each retry's wait, once it is announced
      await t.until((events) => retryDelays(events, slot).length === n);
      await time.advance(retryDelays(t.events, slot)[n - 1]!);
    }
    await drained;
    assert.deepEqual(
      retryDelays(t.events, slot),
      [20, 40, 80, 160, 320, 640, 1280, 2000],
    );
    assert.equal(t.completed(slot)[0]?.attempts, 9);
  });
});

Deno.test("completion retries a failing release only while fewer than maxPendingCompletions writes are pending", async () => {
  const t = setup({ completionWait: 0, maxPendingCompletions: 1 });
  const pending = slotOf("", "pending");
  let down = true;
  t.store.faults.complete = () => down ? "throw" : "pass";
  t.store.faults.release = (_slot, n) => n === 1 ? "throw" : "pass";
  await (await t.guarded(post("pending"))).body?.cancel();
  assert.deepEqual(t.completed(pending), [], "one write pending");
  t.status = () => 503;
  await (await t.guarded(post("full"))).body?.cancel();
  assert.deepEqual(releases(t.events), [["unknown", 1]], "no room: no retry");
  assert.equal(t.store.count("release", slotOf("", "full")), 1);
  down = false;
  await drainCompletions(t.guarded);
  assert.equal(t.completed(pending)[0]?.outcome, "applied");
  await (await t.guarded(post("room"))).body?.cancel();
  await drainCompletions(t.guarded);
  assert.deepEqual(releases(t.events), [["unknown", 1], ["applied", 2]]);
  // With no room at all, a failed release is never retried.
  const none = setup({ maxPendingCompletions: 0 });
  none.store.faults.release = (_slot, n) => n === 1 ? "throw" : "pass";
  none.status = () => 503;
  await (await none.guarded(post("none"))).body?.cancel();
  await drainCompletions(none.guarded);
  assert.deepEqual(releases(none.events), [["unknown", 1]]);
});

Deno.test("drainCompletions() waits for a write that moved to the background while it drained", async () => {
  const t = setup({ completionWait: 0 });
  const a = slotOf("", "a");
  const b = slotOf("", "b");
  const down = new Set([a, b]);
  t.store.faults.complete = (slot) => down.has(slot) ? "throw" : "pass";
  await (await t.guarded(post("a"))).body?.cancel();
  let drained = false;
  const drain = drainCompletions(t.guarded).then(() => drained = true);
  await (await t.guarded(post("b"))).body?.cancel(); // b joins the drain
  down.delete(a);
  await t.until(() => t.completed(a).length === 1);
  // b is retried again after a landed: the drain has not ended meanwhile.
  const retries = retryDelays(t.events, b).length;
  await t.until(() => retryDelays(t.events, b).length > retries);
  assert.equal(drained, false);
  down.delete(b);
  await drain;
  assert.equal(t.completed(b)[0]?.outcome, "applied");
});

Deno.test("completion reports an attempt still unanswered at completionTimeout as unknown, not lost", async () => {
  const t = setup({ completionWait: 0, completionTimeout: 60 });
  const slot = slotOf("", "hung");
  const never = deferred<Fault>();
  t.store.faults.complete = (_slot, n) => n === 1 ? "throw" : never.promise;
  await (await t.guarded(post("hung"))).body?.cancel();
  await drainCompletions(t.guarded);
  const [done] = t.completed(slot);
  assert.equal(done?.outcome, "unknown");
  assert.equal(done?.attempts, 2);
  assert.equal(done?.background, true);
  assert.equal(t.store.count("complete", slot), 2);
});
