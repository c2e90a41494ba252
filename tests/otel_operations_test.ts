// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The OpenTelemetry bridge (src/otel.ts) per store operation and per outcome:
 * every operation timed, the heartbeat's renewals included, each point with
 * exactly the attributes of the module's table; a fenced-out write (`lost`)
 * told apart from one given up (`unknown`); each counter's attribute set
 * pinned. The first file, tests/otel_test.ts, has the outcomes and the span.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Attributes } from "@opentelemetry/api";
import {
  drainCompletions,
  idempotency,
  type IdempotencyEvent,
  MemoryStore,
  StoreError,
} from "../mod.ts";
import { idempotencyTelemetry } from "../src/otel.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { idempotencyOn } from "./_support/idempotency.ts";
import { post } from "./_support/http.ts";
import { deferred, FakeClock, until } from "./_support/time.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import { type Metrics, sdkMetrics } from "./otel/_metrics.ts";

const ok = () => new Response("ok");

/** Each point of `name` as its attributes and its count (or sum). */
async function points(
  metrics: Metrics,
  name: string,
): Promise<{ attributes: Attributes; n: number }[]> {
  const metric = (await metrics.collect()).get(name);
  return (metric?.points ?? []).map((p) => ({
    attributes: p.attributes,
    n: typeof p.value === "number"
      ? p.value
      : (p.value as { count: number }).count,
  }));
}

/** The points sorted by their attributes, for a deepEqual. */
function sorted(
  found: { attributes: Attributes; n: number }[],
): { attributes: Attributes; n: number }[] {
  const key = (p: { attributes: Attributes }) => JSON.stringify(p.attributes);
  return found.toSorted((a, b) => key(a).localeCompare(key(b)));
}

Deno.test("telemetry.store() times claim, complete, release and the heartbeat's extend, each point with only the store and the operation", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const inner = new FaultyStore(new MemoryStore());
  const store = telemetry.store(inner, "memory");
  const gate = deferred();
  const time = new FakeClock();
  const events: string[] = [];
  const guarded = idempotencyOn(time, async (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/held") await gate.promise;
    return new Response(path, { status: path === "/fail" ? 500 : 200 });
  }, {
    scope: "global",
    store,
    lease: 150,
    logger: false,
    onEvent: (event) => {
      telemetry.onEvent(event);
      events.push(event.type);
    },
  });
  const held = guarded(post("held", "{}", { path: "/held" }));
  await until(() => events.includes("claimed"), "the claim");
  await time.advance(150);
  await until(() => inner.calls.extend >= 1, "a renewal");
  gate.resolve();
  await (await held).text();
  await (await guarded(post("fail", "{}", { path: "/fail" }))).text(); // released
  await drainCompletions(guarded);
  assert.equal(inner.calls.release, 1);

  const at = (operation: string) => ({
    "idempotency.store": "memory",
    "idempotency.store.operation": operation,
  });
  assert.deepEqual(
    sorted(await points(metrics, "idempotency.store.duration")),
    sorted([
      { attributes: at("claim"), n: 2 },
      { attributes: at("complete"), n: 1 },
      { attributes: at("release"), n: 1 },
      { attributes: at("extend"), n: inner.calls.extend },
    ]),
  );
});

Deno.test("telemetry.store() marks only the operation that threw with error.type, the error's name", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  class Odd extends MemoryStore {
    override release(_slot: string, _token: string): Promise<"applied"> {
      // Not an Error: a store that rejects with a string.
      return Promise.reject("connection reset");
    }
  }
  const inner = new FaultyStore(new Odd(), [
    { operation: "claim", kind: "throw" },
  ]);
  const store = telemetry.store(inner, "odd");
  const options = { fingerprint: "f", leaseMs: 1000, ttlMs: 1000 };
  await assert.rejects(store.claim("s", options), StoreError);
  const claim = await store.claim("s", options); // no error.type left behind
  assert.equal(claim.state, "acquired");
  const token = claim.state === "acquired" ? claim.token : "";
  await assert.rejects(store.release("s", token));
  assert.equal(await store.extend("s", token, 1000), "applied");
  const at = (operation: string, more: Attributes = {}) => ({
    "idempotency.store": "odd",
    "idempotency.store.operation": operation,
    ...more,
  });
  assert.deepEqual(
    sorted(await points(metrics, "idempotency.store.duration")),
    sorted([
      { attributes: at("claim", { "error.type": "StoreError" }), n: 1 },
      { attributes: at("claim"), n: 1 },
      { attributes: at("release", { "error.type": "_OTHER" }), n: 1 },
      { attributes: at("extend"), n: 1 },
    ]),
  );
});

Deno.test("idempotencyTelemetry() counts a fenced-out write apart from one given up: lost is not given up", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const events: IdempotencyEvent[] = [];
  const onEvent = (event: IdempotencyEvent) => {
    telemetry.onEvent(event);
    events.push(event);
  };
  const lost = new FaultyStore(new MemoryStore(), [
    { operation: "complete", kind: "lost" },
    { operation: "release", kind: "lost" },
  ]);
  const handler = (req: Request) =>
    new Response("x", {
      status: new URL(req.url).pathname === "/fail" ? 500 : 200,
    });
  const fenced = idempotency(handler, {
    scope: "global",
    store: lost,
    onEvent,
  });
  await (await fenced(post("a"))).text();
  await (await fenced(post("b", "{}", { path: "/fail" }))).text();
  await drainCompletions(fenced);
  const outcomes = events.flatMap((e) =>
    e.type === "completed" || e.type === "released"
      ? [`${e.type}:${e.outcome}`]
      : []
  );
  assert.deepEqual(outcomes.toSorted(), ["completed:lost", "released:lost"]);
  assert.deepEqual(await points(metrics, "idempotency.write.given_up"), []);
  assert.deepEqual(await points(metrics, "idempotency.store.errors"), []);

  // The same two writes, their outcome unknown: each counted once, by operation.
  const down = new FaultyStore(new MemoryStore());
  down.failing.add("complete");
  down.failing.add("release");
  const unknown = idempotency(handler, {
    scope: "global",
    store: down,
    onEvent,
    logger: false,
    completionWait: 0,
    completionTimeout: 100,
  });
  await (await unknown(post("c"))).text();
  await (await unknown(post("d", "{}", { path: "/fail" }))).text();
  await drainCompletions(unknown);
  assert.deepEqual(
    sorted(await points(metrics, "idempotency.write.given_up")),
    sorted([
      { attributes: { "idempotency.store.operation": "complete" }, n: 1 },
      { attributes: { "idempotency.store.operation": "release" }, n: 1 },
    ]),
  );
  for (const point of await points(metrics, "idempotency.store.errors")) {
    assert.deepEqual(Object.keys(point.attributes).toSorted(), [
      "error.type",
      "idempotency.store.operation",
    ]);
    assert.equal(point.attributes["error.type"], "StoreError");
  }
  for (const point of await points(metrics, "idempotency.write.retries")) {
    assert.deepEqual(Object.keys(point.attributes), [
      "idempotency.store.operation",
    ]);
  }
});

Deno.test("idempotencyTelemetry() counts each request under idempotency.outcome alone", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const guarded = idempotency(ok, {
    scope: "global",
    store: new MemoryStore(),
    onEvent: telemetry.onEvent,
  });
  await (await guarded(post("k"))).text();
  await (await guarded(post("k"))).text();
  await (await guarded(post("k", "other"))).text();
  assert.deepEqual(
    sorted(await points(metrics, "idempotency.requests")),
    sorted([
      { attributes: { "idempotency.outcome": "executed" }, n: 1 },
      { attributes: { "idempotency.outcome": "replayed" }, n: 1 },
      { attributes: { "idempotency.outcome": "mismatch" }, n: 1 },
    ]),
  );
});

Deno.test("idempotencyTelemetry() counts fallbacks, lost leases and recoveries with their attributes only", async () => {
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  telemetry.onFailoverEvent({
    type: "fallback",
    operation: "claim",
    slot: "s",
    error: new Error("down"),
  });
  telemetry.onEvent({ type: "lease_lost", slot: "s" } as IdempotencyEvent);
  const primary = new FaultyStore(new MemoryStore());
  primary.failing.add("claim");
  const store = telemetry.store(
    new FailoverStore({ primary, fallback: new MemoryStore() }),
  );
  const guarded = idempotency(ok, {
    scope: "global",
    store,
    onEvent: telemetry.onEvent,
    logger: false,
  });
  await (await guarded(post("f"))).text();
  primary.failing.delete("claim");
  await (await guarded(post("f"))).text(); // copied back: recovered
  await (await guarded(post("new"))).text(); // the primary's own
  assert.deepEqual(await points(metrics, "idempotency.failover.fallbacks"), [
    { attributes: {}, n: 2 },
  ]);
  assert.deepEqual(await points(metrics, "idempotency.lease.lost"), [
    { attributes: {}, n: 1 },
  ]);
  telemetry.onFailoverEvent({ type: "recovered", slot: "s", copied: false });
  assert.deepEqual(
    sorted(await points(metrics, "idempotency.failover.recoveries")),
    sorted([
      { attributes: { "idempotency.failover.copied": true }, n: 1 },
      { attributes: { "idempotency.failover.copied": false }, n: 1 },
    ]),
  );
  const duration = await points(metrics, "idempotency.store.duration");
  assert.ok(
    duration.every((p) => p.attributes["idempotency.store"] === "failover"),
    JSON.stringify(duration),
  );
});
