// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A heartbeat never outlives its request: once a request has settled
 * (completed, its completion retried inline or in the background, released,
 * its release retried), its claim is renewed no more, and the heartbeat's
 * shared timer stops at its next tick. Deno's test sanitizers do not flag a
 * timer that outlives its test, so it is asserted here, on fake time.
 *
 * The heartbeat's timer does stay armed until that next tick (at most a
 * sixth of a lease): one timer per middleware, stopped lazily, so that a
 * request costs no `setTimeout`/`clearTimeout` pair. That timer never keeps a
 * process alive and renews nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  drainCompletions,
  type IdempotencyEvent,
  type IdempotencyOptions,
} from "../mod.ts";
import type { StoreOperation } from "../src/store.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { deferred, FakeClock } from "./_support/time.ts";
import { idempotencyOn } from "./_support/idempotency.ts";
import { post } from "./_support/http.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import { until } from "./_support/time.ts";

const LEASE = 600;

interface Case {
  name: string;
  /** The operation that throws once. */
  failsOnce?: StoreOperation;
  status: number;
  throws?: boolean;
  options?: Partial<IdempotencyOptions>;
}

const CASES: Case[] = [
  { name: "completed at once", status: 201 },
  {
    name: "completion failed once, retried inline",
    failsOnce: "complete",
    status: 201,
  },
  {
    name: "completion failed once, retried in the background",
    failsOnce: "complete",
    status: 201,
    options: { completionWait: 0 },
  },
  { name: "not cacheable, released", status: 500 },
  {
    name: "handler threw, release failed once and was retried",
    failsOnce: "release",
    status: 0,
    throws: true,
  },
];

for (const c of CASES) {
  Deno.test(`idempotency() renews nothing once a request settled, and the heartbeat's timer stops: ${c.name}`, async () => {
    const store = new FaultyStore(new MemoryStore({ clock: () => 0 }));
    const time = new FakeClock();
    const events: IdempotencyEvent[] = [];
    const onEvent = (event: IdempotencyEvent) => {
      events.push(event);
      // The fault happens once: the first retry goes through.
      if (event.type === "store_error" && event.operation === c.failsOnce) {
        store.failing.delete(c.failsOnce);
      }
    };
    const gate = deferred();
    const guarded = idempotencyOn(time, async () => {
      await gate.promise;
      if (c.throws) throw new Error("handler failed");
      return new Response("body", { status: c.status });
    }, {
      scope: "global",
      store,
      lease: LEASE,
      onEvent,
      ...c.options,
    });

    const answer = Promise.resolve(guarded(post(crypto.randomUUID()))).then(
      async (response) => (await response.text(), response.status),
      () => "thrown",
    );
    await until(() => events.some((e) => e.type === "claimed"), "the claim");
    // The claim is being renewed while the handler runs.
    await time.advance(LEASE / 2);
    await until(() => store.calls.extend > 0, "a renewal");
    if (c.failsOnce) store.failing.add(c.failsOnce);
    gate.resolve();
    if (c.failsOnce) { // its retry waits on the fake time too
      await until(
        () => events.some((e) => e.type === "write_retry"),
        "a retry",
      );
      const retry = events.find((e) => e.type === "write_retry");
      await time.advance(retry && "delayMs" in retry ? retry.delayMs : 0);
    }
    assert.equal(await answer, c.throws ? "thrown" : c.status);
    await drainCompletions(guarded);
    const settled = events.find((e) =>
      e.type === "completed" || e.type === "released"
    );
    assert.ok(
      settled && "outcome" in settled && settled.outcome === "applied",
      JSON.stringify(events.map((e) => e.type)),
    );
    if (c.failsOnce) {
      assert.ok(
        events.some((e) => e.type === "write_retry"),
        "the fault was injected and retried",
      );
    }

    const renewals = store.calls.extend;
    await time.advance(LEASE * 5);
    assert.equal(
      store.calls.extend,
      renewals,
      "a claim was renewed after its request settled",
    );
    assert.equal(time.pending, 0, "the heartbeat's timer is still armed");
  });
}
