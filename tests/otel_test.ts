// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The OpenTelemetry bridge (src/otel.ts) read through the SDK's in-memory
 * metric reader: each request counted once by its outcome, with the span
 * attributes; the store timing wrapper; the counters of store errors, write
 * retries, given-up writes, lease losses, undos and failover. Each
 * operation's timing, each counter's attributes and a lost write told apart
 * from one given up are in `otel_operations_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  drainCompletions,
  idempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  type IdempotencyStore,
  MemoryStore,
} from "../mod.ts";
import { idempotencyTelemetry, type RequestOutcome } from "../src/otel.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { SqliteStore } from "../src/stores/sqlite.ts";
import { idempotencyOn } from "./_support/idempotency.ts";
import { post } from "./_support/http.ts";
import { deferred, FakeClock, until } from "./_support/time.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import {
  activeSpans,
  matches,
  RecordingSpan,
  sdkMetrics,
} from "./otel/_metrics.ts";

const ok = () => new Response("ok");

Deno.test("idempotencyTelemetry() counts each request once by its outcome and sets it on the active span", async () => {
  await using metrics = sdkMetrics();
  using spans = activeSpans();
  const { meterProvider } = metrics;
  const telemetry = idempotencyTelemetry({ meterProvider });
  const events: IdempotencyEvent[] = [];
  const onEvent = (event: IdempotencyEvent) => {
    telemetry.onEvent(event);
    events.push(event);
  };
  let gate = deferred();
  const held = async (req: Request) => {
    if (new URL(req.url).pathname === "/held") await gate.promise;
    return ok();
  };
  const base = { scope: "global", onEvent } as const;
  const plain = idempotency(held, { ...base, store: new MemoryStore() });
  const waiting = idempotency(held, {
    ...base,
    store: new MemoryStore(),
    waitForInFlight: 30_000,
  });
  const down = new FaultyStore(new MemoryStore());
  down.failing.add("claim");
  const unavailable = idempotency(ok, { ...base, store: down });
  // A store whose claim finds a value it cannot read (fingerprint null).
  const damaged = new MemoryStore();
  damaged.claim = () =>
    Promise.resolve({ state: "in_flight", fingerprint: null, retryAfterMs: 1 });
  const unreadable = idempotency(ok, { ...base, store: damaged });
  const open = idempotencyTelemetry({ meterProvider });
  const failOpen = idempotency(ok, {
    scope: "global",
    store: down,
    failOpen: true,
    onEvent: open.onEvent,
  });

  const sent: [RequestOutcome, RecordingSpan][] = [];
  const send = async (
    outcome: RequestOutcome,
    guarded: (req: Request) => Response | Promise<Response>,
    req: Request,
  ) => {
    const span = new RecordingSpan();
    sent.push([outcome, span]);
    const res = await spans.within(span, () => guarded(req));
    await res.body?.cancel();
    return res.status;
  };
  const held409 = (key: string) => post(key, "{}", { path: "/held" });

  assert.equal(await send("executed", plain, post("a")), 200);
  assert.equal(await send("replayed", plain, post("a")), 200);
  assert.equal(await send("mismatch", plain, post("a", '{"x":1}')), 422);
  assert.equal(await send("rejected", plain, post("a,b")), 400);
  const first = send("executed", plain, held409("h"));
  await until(() => events.some((e) => e.type === "claimed"), "the claim");
  assert.equal(await send("conflict", plain, held409("h")), 409);
  gate.resolve();
  assert.equal(await first, 200);

  gate = deferred();
  events.length = 0;
  const owner = send("executed", waiting, held409("w"));
  await until(() => events.some((e) => e.type === "claimed"), "the claim");
  const duplicate = send("waited", waiting, held409("w"));
  await until(() => events.some((e) => e.type === "waiting"), "the waiter");
  gate.resolve();
  assert.equal(await owner, 200);
  assert.equal(await duplicate, 200);
  assert.equal(await send("replayed", waiting, held409("w")), 200, "no wait");

  assert.equal(await send("unavailable", unavailable, post("u")), 503);
  assert.equal(await send("unreadable", unreadable, post("r")), 500);
  assert.equal(await send("fail_open", failOpen, post("o")), 200);

  const counted = await metrics.collect();
  assert.equal(counted.get("idempotency.requests")?.unit, "{request}");
  const expected = new Map<string, number>();
  for (const [outcome] of sent) {
    expected.set(outcome, (expected.get(outcome) ?? 0) + 1);
  }
  assert.equal(expected.size, 9, "every outcome was sent");
  const got = new Map<string, number>();
  for (const point of counted.get("idempotency.requests")!.points) {
    got.set(
      String(point.attributes["idempotency.outcome"]),
      point.value as number,
    );
  }
  assert.deepEqual(got, expected);

  for (const [outcome, span] of sent) {
    assert.equal(span.attributes["idempotency.outcome"], outcome);
    assert.equal(
      span.attributes["idempotency.replayed"],
      outcome === "replayed" || outcome === "waited",
      outcome,
    );
    const prefix = span.attributes["idempotency.slot_prefix"];
    if (outcome === "rejected") assert.equal(prefix, undefined);
    else assert.match(String(prefix), /^[0-9a-f]{8}$/, outcome);
  }
  const slot = events.find((e) => e.type === "claimed")!.slot!;
  assert.equal(
    sent.find(([outcome]) => outcome === "waited")![1]
      .attributes["idempotency.slot_prefix"],
    slot.slice(0, 8),
  );
});

Deno.test("idempotencyTelemetry() sets no span attribute with spanAttributes: false", async () => {
  await using metrics = sdkMetrics();
  using spans = activeSpans();
  const { meterProvider } = metrics;
  const telemetry = idempotencyTelemetry({
    meterProvider,
    spanAttributes: false,
  });
  const guarded = idempotency(ok, {
    scope: "global",
    onEvent: telemetry.onEvent,
  });
  const span = new RecordingSpan();
  await (await spans.within(span, () => guarded(post("k")))).text();
  assert.deepEqual(span.attributes, {});
  assert.equal(await metrics.sum("idempotency.requests"), 1);
});

Deno.test("idempotencyTelemetry().store() times each operation by store and operation, with error.type when it threw", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const faulty = new FaultyStore(new MemoryStore(), [
    { operation: "claim", kind: "throw" },
  ]);
  const store = telemetry.store(faulty, "memory");
  const guarded = idempotency(ok, {
    scope: "global",
    store,
    onEvent: telemetry.onEvent,
  });
  const t0 = performance.now();
  assert.equal((await guarded(post("k"))).status, 503);
  await (await guarded(post("k"))).text();
  await (await guarded(post("k"))).text();
  const window = (performance.now() - t0) / 1000;

  const duration = (await metrics.collect()).get("idempotency.store.duration")!;
  assert.equal(duration.unit, "s");
  const count = (where: Record<string, string>) =>
    duration.points
      .filter((p) => matches(p.attributes, where))
      .reduce((n, p) => n + (p.value as { count: number }).count, 0);
  const memory = { "idempotency.store": "memory" };
  assert.equal(
    count({
      ...memory,
      "idempotency.store.operation": "claim",
      "error.type": "StoreError",
    }),
    1,
  );
  assert.equal(count({ ...memory, "idempotency.store.operation": "claim" }), 3);
  assert.equal(
    count({ ...memory, "idempotency.store.operation": "complete" }),
    1,
  );
  let recorded = 0;
  for (const point of duration.points) {
    const { min, sum } = point.value as { min: number; sum: number };
    assert.ok(min >= 0);
    recorded += sum;
  }
  assert.ok(recorded <= window, "in seconds: within the calls' wall time");
  assert.equal(
    await metrics.sum("idempotency.store.errors", {
      "idempotency.store.operation": "claim",
      "error.type": "StoreError",
    }),
    1,
  );
  assert.equal(
    await metrics.sum("idempotency.requests", {
      "idempotency.outcome": "unavailable",
    }),
    1,
  );
});

Deno.test("idempotencyTelemetry().store() passes the optional methods through and adds none", async () => {
  const telemetry = idempotencyTelemetry();
  const memory = new MemoryStore();
  const bare = telemetry.store(new FaultyStore(memory), "bare");
  for (
    const method of ["unitOfWork", "waitForChange", "peek", "forget", "stats"]
  ) {
    assert.equal(method in bare, false, method);
  }
  const rich: IdempotencyStore = {
    claim: (slot, options) => memory.claim(slot, options),
    complete: (slot, token, response) => memory.complete(slot, token, response),
    release: (slot, token) => memory.release(slot, token),
    extend: (slot, token, ms) => memory.extend(slot, token, ms),
    peek: () => Promise.resolve({ state: "absent" }),
    forget: () => Promise.resolve("absent"),
    stats: (options) =>
      Promise.resolve({
        inFlight: options?.limit ?? 0,
        completed: 0,
        unreadable: 0,
        exact: true,
      }),
    waitForChange: () => Promise.resolve(),
  };
  const wrapped = telemetry.store(rich, "rich");
  assert.equal("unitOfWork" in wrapped, false);
  assert.deepEqual(await wrapped.peek!("s"), { state: "absent" });
  assert.equal(await wrapped.forget!("s"), "absent");
  assert.equal((await wrapped.stats!({ limit: 7 })).inFlight, 7);
  await wrapped.waitForChange!("s", new AbortController().signal);
  assert.throws(() => telemetry.store(rich, ""), TypeError);
});

Deno.test("idempotencyTelemetry() counts write retries and given-up writes of complete and release", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const events: IdempotencyEvent[] = [];
  const store = new FaultyStore(new MemoryStore());
  store.failing.add("complete");
  store.failing.add("release");
  const options: IdempotencyOptions = {
    scope: "global",
    store,
    completionWait: 0,
    completionTimeout: 200,
    onEvent: (event) => {
      telemetry.onEvent(event);
      events.push(event);
    },
  };
  const completing = idempotency(ok, options);
  await (await completing(post("c"))).text();
  await drainCompletions(completing);
  const healthy = idempotency(ok, { ...options, store: new MemoryStore() });
  await (await healthy(post("applied"))).text(); // not given up
  const throwing = idempotency(() => {
    throw new Error("handler failed");
  }, options);
  await assert.rejects(async () => await throwing(post("r")), /handler failed/);
  await drainCompletions(throwing);

  const retries = (operation: string) =>
    events.filter((e) => e.type === "write_retry" && e.operation === operation)
      .length;
  assert.ok(retries("complete") > 0 && retries("release") === 3);
  for (const operation of ["complete", "release"]) {
    const where = { "idempotency.store.operation": operation };
    assert.equal(
      await metrics.sum("idempotency.write.retries", where),
      retries(operation),
    );
    assert.equal(
      await metrics.sum("idempotency.write.given_up", where),
      1,
      operation,
    );
    assert.equal(
      await metrics.sum("idempotency.store.errors", where),
      events.filter((e) =>
        e.type === "store_error" && e.operation === operation
      ).length,
    );
  }
});

Deno.test("idempotencyTelemetry() counts a lease the heartbeat found lost", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const store = new FaultyStore(new MemoryStore(), [
    { operation: "extend", kind: "lost" },
  ]);
  const events: string[] = [];
  const gate = deferred();
  const time = new FakeClock();
  const guarded = idempotencyOn(time, async () => {
    await gate.promise;
    return ok();
  }, {
    scope: "global",
    store,
    lease: 150,
    onEvent: (event) => {
      telemetry.onEvent(event);
      events.push(event.type);
    },
  });
  const pending = guarded(post("lease"));
  await until(() => events.includes("claimed"), "the claim");
  await time.advance(150);
  await until(() => events.includes("lease_lost"), "the lost lease");
  gate.resolve();
  await (await pending).text();
  assert.equal(await metrics.sum("idempotency.lease.lost"), 1);
});

Deno.test("idempotencyTelemetry() counts a FailoverStore's fallbacks and recoveries", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const primary = new FaultyStore(new MemoryStore());
  primary.failing.add("claim");
  const store = new FailoverStore({
    primary,
    fallback: new MemoryStore(),
    onEvent: telemetry.onFailoverEvent,
  });
  const guarded = idempotency(ok, {
    scope: "global",
    store,
    onEvent: telemetry.onEvent,
  });
  await (await guarded(post("f"))).text();
  assert.equal(await metrics.sum("idempotency.failover.fallbacks"), 1);
  primary.failing.delete("claim");
  const replay = await guarded(post("f"));
  await replay.text();
  assert.equal(
    await metrics.sum("idempotency.failover.recoveries", {
      "idempotency.failover.copied": true,
    }),
    1,
  );
  assert.equal(
    await metrics.sum("idempotency.requests", {
      "idempotency.outcome": "replayed",
    }),
    1,
  );
});

Deno.test("idempotencyTelemetry() counts undos by outcome", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  for (const outcome of ["applied", "applied", "lost", "dropped"] as const) {
    telemetry.onStoreEvent({ type: "undo", slot: "s", outcome });
  }
  const undos = (outcome: string) =>
    metrics.sum("idempotency.undos", { "idempotency.undo.outcome": outcome });
  assert.equal(await undos("applied"), 2);
  assert.equal(await undos("lost"), 1);
  assert.equal(await undos("dropped"), 1);
  assert.equal(
    (await metrics.collect()).get("idempotency.undos")?.unit,
    "{undo}",
  );
});

Deno.test("idempotencyTelemetry().store() keeps the inner store's own methods and type: a FailoverStore migrates a timed side", async () => {
  class Migrating extends MemoryStore {
    #migrations = 0;
    migrate(): Promise<void> {
      this.#migrations++; // a private field: the method runs on the store itself
      return Promise.resolve();
    }
    get migrations(): number {
      return this.#migrations;
    }
  }
  const telemetry = idempotencyTelemetry();
  const inner = new Migrating();
  const timed = telemetry.store(inner, "pg");
  await timed.migrate(); // typed as Migrating: no cast
  const failover = new FailoverStore({
    primary: telemetry.store(new MemoryStore(), "redis"),
    fallback: timed,
  });
  await failover.migrate();
  assert.equal(inner.migrations, 2);
  assert.equal(timed.migrations, 2);
});

Deno.test("telemetry.store() names a SqliteStore 'sqlite' by default and times its operations", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const dir = await Deno.makeTempDir();
  const sqlite = new SqliteStore({ database: `${dir}/app.sqlite` });
  try {
    await sqlite.migrate();
    const guarded = idempotency(ok, {
      scope: "global",
      store: telemetry.store(sqlite),
    });
    await (await guarded(post("k"))).text();
    await (await guarded(post("k"))).text();
    const duration = (await metrics.collect()).get(
      "idempotency.store.duration",
    )!;
    const claims = duration.points.filter((p) =>
      matches(p.attributes, {
        "idempotency.store": "sqlite",
        "idempotency.store.operation": "claim",
      })
    ).reduce((n, p) => n + (p.value as { count: number }).count, 0);
    assert.equal(claims, 2);
  } finally {
    sqlite.close();
    await Deno.remove(dir, { recursive: true });
  }
});
