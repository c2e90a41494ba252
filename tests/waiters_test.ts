// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `waitForInFlight` in one process: a duplicate waits for the request that
 * holds its key and gets its response, woken by that request's settle
 * without a store read; it gives up at the bound or when its client leaves;
 * when the first request fails exactly one waiter runs the handler. Also
 * `skip`. Every first handler is gated by a promise the test controls.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  idempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
} from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import type { IdempotencyStore, StoreOperation } from "../src/store.ts";
import { callCounts, recorder, StoreWrapper } from "./_support/stores.ts";
import { deferred, waitFor } from "./_support/time.ts";
import { post } from "./_support/http.ts";

/** Counts the store calls per operation. */
class CountingStore extends StoreWrapper {
  readonly calls = callCounts();
  protected override around<T>(
    operation: StoreOperation,
    _slot: string,
    run: () => Promise<T>,
  ): Promise<T> {
    this.calls[operation]++;
    return run();
  }
}

function count(events: IdempotencyEvent[], type: IdempotencyEvent["type"]) {
  return events.filter((e) => e.type === type).length;
}

/** A handler whose runs each wait for the gate the test opens for them. */
function gated() {
  const gates: ReturnType<typeof deferred<Response>>[] = [];
  let runs = 0;
  return {
    get runs() {
      return runs;
    },
    gates,
    handler: async (req: Request) => {
      await req.arrayBuffer();
      runs++;
      const gate = deferred<Response>();
      gates.push(gate);
      return await gate.promise;
    },
  };
}

/**
 * A gated app guarded with `options` and a recorder of its events, its first
 * request for key `k` running.
 */
async function firstRunning(options: Partial<IdempotencyOptions>) {
  const app = gated();
  const log = recorder();
  const guarded = idempotency(app.handler, {
    scope: "global",
    ...options,
    onEvent: log.onEvent,
  });
  const first = guarded(post("k"));
  await waitFor("the first run", () => app.runs === 1);
  return { app, log, guarded, first };
}

/**
 * Two instances of a gated app on one MemoryStore, the other's through
 * `wrap`: the owner's first request for `k` runs, and its duplicate waits on
 * the other instance.
 */
async function duplicateOnOtherInstance<S extends IdempotencyStore>(
  wrap: (shared: MemoryStore) => S,
  options: Partial<IdempotencyOptions> = {},
) {
  const app = gated();
  const shared = new MemoryStore();
  const owner = idempotency(app.handler, { scope: "global", store: shared });
  const store = wrap(shared);
  const other = idempotency(app.handler, {
    scope: "global",
    ...options,
    store,
    waitForInFlight: 60_000,
  });
  const first = owner(post("k"));
  await waitFor("the first run", () => app.runs === 1);
  const waiting = other(post("k"));
  return {
    app,
    store,
    first,
    waiting,
    /** The owner answers 201 `ok`; the waiter replays it. */
    async settle() {
      app.gates[0]!.resolve(new Response("ok", { status: 201 }));
      await (await first).text();
      const res = await waiting;
      assert.equal(res.headers.get("idempotent-replayed"), "true");
      assert.equal(await res.text(), "ok");
    },
  };
}

Deno.test("idempotency() with waitForInFlight answers a duplicate with the first response, woken without a store read", async () => {
  const store = new CountingStore(new MemoryStore());
  const { app, log, guarded, first } = await firstRunning({
    store,
    waitForInFlight: 60_000,
  });
  const duplicates = [guarded(post("k")), guarded(post("k"))];
  await waitFor("two waiters", () => count(log.events, "waiting") === 2);
  assert.equal(store.calls.claim, 3);
  app.gates[0]!.resolve(Response.json({ id: 1 }, { status: 201 }));
  const [live, ...replays] = await Promise.all([first, ...duplicates]);
  assert.deepEqual(await live!.json(), { id: 1 });
  for (const replay of replays) {
    assert.equal(replay.status, 201);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(await replay.json(), { id: 1 });
  }
  assert.equal(app.runs, 1);
  // One claim each on arrival, one each after the wake: none while parked.
  assert.equal(store.calls.claim, 5);
  const woken = log.events.filter((e) => e.type === "woken");
  assert.deepEqual(woken.map((e) => [e.via, e.reads]), [
    ["owner", 1],
    ["owner", 1],
  ]);
  assert.equal(count(log.events, "conflict"), 0);
});

Deno.test("idempotency() without waitForInFlight still answers 409 at once", async () => {
  const { app, guarded, first } = await firstRunning({
    store: new MemoryStore(),
  });
  const res = await guarded(post("k"));
  assert.equal(res.status, 409);
  await res.body?.cancel();
  app.gates[0]!.resolve(new Response("ok"));
  await (await first).text();
});

Deno.test("idempotency() with waitForInFlight answers 409 with Retry-After past the bound", async () => {
  const store = new CountingStore(new MemoryStore());
  const { app, log, guarded, first } = await firstRunning({
    store,
    waitForInFlight: 30,
  });
  const res = await guarded(post("k"));
  assert.equal(res.status, 409);
  assert.ok(Number(res.headers.get("retry-after")) >= 1);
  await res.body?.cancel();
  const ended = log.events.find((e) => e.type === "wait_ended");
  assert.equal(ended?.type === "wait_ended" && ended.reason, "timed_out");
  // The owner is local: the waiter parked, and read nothing more.
  assert.equal(store.calls.claim, 2);
  assert.equal(count(log.events, "conflict"), 1);
  app.gates[0]!.resolve(new Response("ok"));
  await (await first).text();
});

Deno.test("idempotency() with waitForInFlight stops waiting when the client leaves", async () => {
  const { app, log, guarded, first } = await firstRunning({
    store: new MemoryStore(),
    waitForInFlight: 60_000,
  });
  const client = new AbortController();
  const request = new Request(post("k"), { signal: client.signal });
  const waiting = guarded(request);
  await waitFor("the waiter", () => count(log.events, "waiting") === 1);
  client.abort();
  const res = await waiting;
  assert.equal(res.status, 409);
  await res.body?.cancel();
  const ended = log.events.find((e) => e.type === "wait_ended");
  assert.equal(ended?.type === "wait_ended" && ended.reason, "gone");
  // The owner goes on and settles as usual.
  app.gates[0]!.resolve(new Response("ok", { status: 201 }));
  assert.equal(await (await first).text(), "ok");
  assert.equal(app.runs, 1);
});

Deno.test("idempotency() with waitForInFlight lets exactly one waiter run when the first request fails, the others replay it", async () => {
  const store = new CountingStore(new MemoryStore());
  const { app, log, guarded, first } = await firstRunning({
    store,
    waitForInFlight: 60_000,
  });
  const waiters = Array.from({ length: 5 }, () => guarded(post("k")));
  await waitFor("five waiters", () => count(log.events, "waiting") === 5);
  // Not cacheable: the slot is released, and one waiter takes it.
  app.gates[0]!.resolve(new Response("busy", { status: 500 }));
  assert.equal((await first).status, 500);
  await waitFor("the second run", () => app.runs === 2);
  let settled = 0;
  for (const waiter of waiters) Promise.resolve(waiter).then(() => settled++);
  await waitFor(
    "the others parked again",
    () => store.calls.claim === 1 + 5 + 5,
  );
  assert.equal(settled, 0);
  assert.equal(app.runs, 2);
  app.gates[1]!.resolve(Response.json({ id: 2 }, { status: 201 }));
  const answers = await Promise.all(waiters);
  const bodies = await Promise.all(answers.map((r) => r.json()));
  assert.deepEqual(bodies, Array(5).fill({ id: 2 }));
  assert.deepEqual(
    answers.map((r) => r.headers.get("idempotent-replayed")).sort(),
    [null, "true", "true", "true", "true"],
  );
  assert.equal(app.runs, 2);
  // The four that parked again were woken by the second owner's settle.
  assert.equal(store.calls.claim, 1 + 5 + 5 + 4);
  assert.equal(count(log.events, "claimed"), 2);
});

Deno.test("idempotency() with waitForInFlight lets a thrown first request hand the key to one waiter", async () => {
  let runs = 0;
  const gate = deferred();
  const log = recorder();
  const guarded = idempotency(async (req) => {
    await req.arrayBuffer();
    runs++;
    if (runs === 1) {
      await gate.promise;
      throw new Error("payment provider down");
    }
    return new Response(`run ${runs}`, { status: 201 });
  }, {
    scope: "global",
    store: new MemoryStore(),
    waitForInFlight: 60_000,
    onEvent: log.onEvent,
  });
  const first = guarded(post("k"));
  await waitFor("the first run", () => runs === 1);
  const waiters = [guarded(post("k")), guarded(post("k"))];
  await waitFor("two waiters", () => count(log.events, "waiting") === 2);
  gate.resolve();
  await assert.rejects(Promise.resolve(first), /payment provider down/);
  const texts = await Promise.all(
    (await Promise.all(waiters)).map((r) => r.text()),
  );
  assert.deepEqual(texts, ["run 2", "run 2"]);
  assert.equal(runs, 2);
});

Deno.test("idempotency() with waitForInFlight answers 409 at once past maxWaiting", async () => {
  const { app, log, guarded, first } = await firstRunning({
    store: new MemoryStore(),
    waitForInFlight: 60_000,
    maxWaiting: 1,
  });
  const waiting = guarded(post("k"));
  await waitFor("the waiter", () => count(log.events, "waiting") === 1);
  const refused = await guarded(post("k"));
  assert.equal(refused.status, 409);
  await refused.body?.cancel();
  assert.equal(count(log.events, "wait_refused"), 1);
  app.gates[0]!.resolve(new Response("ok", { status: 201 }));
  await (await first).text();
  assert.equal(await (await waiting).text(), "ok");
});

Deno.test("idempotency() with waitForInFlight polls a store whose owner is another instance", async () => {
  const log = recorder();
  const { app, store, settle } = await duplicateOnOtherInstance(
    (shared) => new CountingStore(shared),
    { onEvent: log.onEvent },
  );
  await waitFor("the waiter", () => count(log.events, "waiting") === 1);
  assert.equal(
    log.events.find((e) => e.type === "waiting")?.type === "waiting" &&
      (log.events.find((e) => e.type === "waiting") as { via: string }).via,
    "poll",
  );
  await settle();
  const woken = log.events.find((e) => e.type === "woken");
  assert.ok(woken?.type === "woken" && woken.via === "poll");
  assert.equal(store.calls.claim, 1 + woken.reads);
  assert.equal(app.runs, 1);
});

Deno.test("idempotency() checks waitForInFlight, maxWaiting and skip", () => {
  const ok = () => new Response("ok");
  assert.throws(
    () => idempotency(ok, { scope: "global", waitForInFlight: -1 }),
    RangeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", waitForInFlight: 1.5 }),
    RangeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", maxWaiting: -1 }),
    RangeError,
  );
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => idempotency(ok, { scope: "global", skip: "yes" as any }),
    TypeError,
  );
});

Deno.test("idempotency() passes a request skip() returns true for straight through: no body read, no store call", async () => {
  const store = new CountingStore(new MemoryStore());
  let runs = 0;
  const guarded = idempotency(async (req) => {
    runs++;
    return new Response(await req.text());
  }, {
    scope: "global",
    store,
    skip: (req) => new URL(req.url).pathname.startsWith("/webhooks/"),
  });
  const request = post("k", "raw", { path: "/webhooks/stripe" });
  const seen: Request[] = [];
  const handler = idempotency((req) => {
    seen.push(req);
    return new Response("ok");
  }, { scope: "global", store, skip: () => true });
  await (await handler(request)).text();
  assert.equal(seen[0], request);
  assert.equal(request.bodyUsed, false);
  for (let i = 0; i < 2; i++) {
    const res = await guarded(post("k", "raw", { path: "/webhooks/stripe" }));
    assert.equal(await res.text(), "raw");
    assert.equal(res.headers.get("idempotent-replayed"), null);
  }
  assert.equal(runs, 2);
  assert.equal(store.calls.claim, 0);
  // Not skipped: guarded as before.
  await (await guarded(post("k", "raw"))).text();
  const again = await guarded(post("k", "raw"));
  assert.equal(again.headers.get("idempotent-replayed"), "true");
  await again.body?.cancel();
  assert.equal(runs, 3);
});

Deno.test("idempotent() (Hono) passes waitForInFlight and skip through, a skipped route's body read earlier included", async () => {
  const { Hono } = await import("hono");
  const { idempotent } = await import("../src/hono.ts");
  const gate = deferred();
  let runs = 0;
  const log = recorder();
  const app = new Hono();
  app.use("/webhooks/*", async (c, next) => {
    await c.req.text();
    await next();
  });
  app.use(
    "*",
    idempotent({
      scope: "global",
      store: new MemoryStore(),
      waitForInFlight: 60_000,
      skip: (req) => new URL(req.url).pathname.startsWith("/webhooks/"),
      onEvent: log.onEvent,
    }),
  );
  app.post("/payments", async (c) => {
    runs++;
    await gate.promise;
    return c.text(`run ${runs}`, 201);
  });
  app.post("/webhooks/stripe", (c) => c.text("hook"));
  const hook = await app.request(post("k", "{}", { path: "/webhooks/stripe" }));
  assert.equal(await hook.text(), "hook");
  const first = app.request(post("k"));
  await waitFor("the first run", () => runs === 1);
  const duplicate = app.request(post("k"));
  await waitFor("the waiter", () => count(log.events, "waiting") === 1);
  gate.resolve();
  assert.equal(await (await first).text(), "run 1");
  const replay = await duplicate;
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(await replay.text(), "run 1");
  assert.equal(runs, 1);
});

/** A MemoryStore whose waitForChange() misbehaves as `watch` says. */
class WatchedStore extends CountingStore {
  watches = 0;
  constructor(
    inner: MemoryStore,
    readonly watch: (signal: AbortSignal) => Promise<void>,
  ) {
    super(inner);
  }
  waitForChange(_slot: string, signal: AbortSignal): Promise<void> {
    this.watches++;
    return this.watch(signal);
  }
}

for (
  const [what, watch] of [
    ["rejects", () => Promise.reject(new Error("watch refused"))],
    ["resolves at once", () => Promise.resolve()],
  ] as const
) {
  Deno.test(`idempotency() with waitForInFlight polls when the store's waitForChange() ${what}, without spinning`, async () => {
    const { store, settle } = await duplicateOnOtherInstance(
      (shared) => new WatchedStore(shared, watch),
    );
    // The arrival claim and three polls.
    await waitFor("three polls", () => store.calls.claim >= 4);
    // Not trusted after its first failure or false alarm.
    assert.equal(store.watches, 1);
    await settle();
  });
}

/**
 * A MemoryStore whose claims each wait for `beforeClaim` (it may throw), and
 * whose `waitForChange()` sees no change: a poll step ends by its delay.
 */
class HookedStore extends StoreWrapper {
  claims = 0;
  beforeClaim: (n: number) => Promise<void> | void = () => {};
  protected override async around<T>(
    operation: StoreOperation,
    _slot: string,
    run: () => Promise<T>,
  ): Promise<T> {
    if (operation === "claim") await this.beforeClaim(++this.claims);
    return await run();
  }
  waitForChange(_slot: string, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) =>
      signal.addEventListener("abort", () => resolve(), { once: true })
    );
  }
}

/** The first request for `k` runs on one instance; `other` waits up to `waitForInFlight` on a second. */
async function heldByOtherInstance(waitForInFlight: number) {
  const app = gated();
  const shared = new MemoryStore();
  const owner = idempotency(app.handler, { scope: "global", store: shared });
  const store = new HookedStore(shared);
  const log = recorder();
  const other = idempotency(app.handler, {
    scope: "global",
    store,
    waitForInFlight,
    onEvent: log.onEvent,
  });
  const first = owner(post("k"));
  await waitFor("the first run", () => app.runs === 1);
  return {
    store,
    log,
    other,
    async finish() {
      app.gates[0]!.resolve(new Response("ok", { status: 201 }));
      await (await first).text();
      assert.equal(app.runs, 1);
    },
  };
}

/** The `[reason, reads]` of each `wait_ended` event. */
function waitsEnded(events: IdempotencyEvent[]) {
  return events.flatMap((e) =>
    e.type === "wait_ended" ? [[e.reason, e.reads]] : []
  );
}

Deno.test("waiting: a client that left before its wait begins gives up its place at once", async () => {
  const { app, log, guarded, first } = await firstRunning({
    store: new MemoryStore(),
    waitForInFlight: 5_000,
    maxWaiting: 1,
  });
  const left = new Request(post("k"), { signal: AbortSignal.abort() });
  const res = await guarded(left);
  assert.equal(res.status, 409);
  await res.body?.cancel();
  assert.deepEqual(waitsEnded(log.events), [["gone", 0]]);
  // Its place is free again: the next duplicate waits, it is not refused.
  const waiting = guarded(post("k"));
  await waitFor("the waiter", () => count(log.events, "waiting") === 2);
  assert.equal(count(log.events, "wait_refused"), 0);
  app.gates[0]!.resolve(new Response("ok", { status: 201 }));
  await (await first).text();
  assert.equal(await (await waiting).text(), "ok");
});

Deno.test("waiting: a client that leaves while a claim is in flight gives up its place at once", async () => {
  const { store, log, other, finish } = await heldByOtherInstance(5_000);
  const gate = deferred();
  store.beforeClaim = (n) => n === 2 ? gate.promise : undefined;
  const client = new AbortController();
  const waiting = other(new Request(post("k"), { signal: client.signal }));
  await waitFor("the poll's claim", () => store.claims === 2);
  client.abort();
  gate.resolve();
  const res = await waiting;
  assert.equal(res.status, 409);
  await res.body?.cancel();
  assert.deepEqual(waitsEnded(log.events), [["gone", 1]]);
  assert.equal(store.claims, 2, "no read after it left");
  await finish();
});

Deno.test("wait_ended: timed_out when the bound passes between polls", async () => {
  const { log, other, finish } = await heldByOtherInstance(50);
  const res = await other(post("k"));
  assert.equal(res.status, 409);
  await res.body?.cancel();
  const [[reason, reads] = []] = waitsEnded(log.events);
  assert.equal(reason, "timed_out");
  assert.ok(Number(reads) >= 1, "it polled");
  await finish();
});

Deno.test("wait_ended: unreachable when a poll's claim throws, and 503", async () => {
  const { store, log, other, finish } = await heldByOtherInstance(5_000);
  store.beforeClaim = (n) => {
    if (n === 2) throw new Error("store down");
  };
  const res = await other(post("k"));
  assert.equal(res.status, 503);
  await res.body?.cancel();
  assert.deepEqual(waitsEnded(log.events), [["unreachable", 1]]);
  await finish();
});

Deno.test("waiting: maxWaiting duplicates wait at once, the next is refused at once", async () => {
  const { app, log, guarded, first } = await firstRunning({
    store: new MemoryStore(),
    waitForInFlight: 5_000,
    maxWaiting: 2,
  });
  const waiting = [guarded(post("k"))];
  await waitFor("one waiter", () => count(log.events, "waiting") === 1);
  waiting.push(guarded(post("k")));
  await waitFor("two waiters", () => count(log.events, "waiting") === 2);
  const refused = await guarded(post("k"));
  assert.equal(refused.status, 409);
  await refused.body?.cancel();
  assert.deepEqual(
    log.events.flatMap((e) => e.type === "wait_refused" ? [e.waiting] : []),
    [2],
  );
  assert.deepEqual(waitsEnded(log.events), [], "the two still wait");
  app.gates[0]!.resolve(new Response("ok", { status: 201 }));
  await (await first).text();
  for (const res of await Promise.all(waiting)) {
    assert.equal(await res.text(), "ok");
  }
});
