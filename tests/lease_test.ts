// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The heartbeat's renewal cadence, on fake time: a claim is renewed well
 * within its lease for as long as its handler runs, so a retry can never take
 * over a handler that is still working.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Heartbeat, type HeartbeatClock } from "../src/_lease.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import type { IdempotencyStore } from "../src/store.ts";

/** Time that moves only when the test moves it, with timers that fire in order. */
class FakeTime implements HeartbeatClock {
  #now = 1_000_000;
  #next = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): number {
    const id = ++this.#next;
    this.#timers.set(id, { at: this.#now + ms, fn });
    return id;
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Moves to `target`, firing each timer due on the way at its own time, and
   * after each one waits for what `settle` returns.
   */
  async advanceTo(target: number, settle: () => Promise<void>): Promise<void> {
    for (;;) {
      let first: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.#timers) {
        if (entry[1].at <= target && (!first || entry[1].at < first[1].at)) {
          first = entry;
        }
      }
      if (first === undefined) break;
      this.#timers.delete(first[0]);
      this.#now = first[1].at;
      first[1].fn();
      await settle();
    }
    this.#now = target;
  }
}

Deno.test("Heartbeat renews a claim every third of its lease for as long as the handler runs", async () => {
  const lease = 150;
  const handlerMs = 700;
  const time = new FakeTime();
  const inner = new MemoryStore({ clock: () => time.now() });
  const extends_: number[] = [];
  const inFlight: Promise<unknown>[] = [];
  const store: IdempotencyStore = {
    claim: (slot, options) => inner.claim(slot, options),
    complete: (slot, token, record) => inner.complete(slot, token, record),
    release: (slot, token) => inner.release(slot, token),
    extend: (slot, token, leaseMs) => {
      extends_.push(time.now());
      const done = inner.extend(slot, token, leaseMs);
      inFlight.push(done);
      return done;
    },
  };
  const problems: string[] = [];
  const heartbeat = new Heartbeat(store, lease, {
    lost: () => problems.push("lost"),
    error: (_beat, error) => problems.push(`error: ${error}`),
  }, time);

  const options = { fingerprint: "fp", leaseMs: lease, ttlMs: 60_000 };
  const claim = await inner.claim("slow", options);
  assert.equal(claim.state, "acquired");
  if (claim.state !== "acquired") return;
  const claimedAt = time.now();
  const beat = heartbeat.start("slow", claim.token);
  await time.advanceTo(claimedAt + handlerMs, async () => {
    await Promise.all(inFlight);
  });
  const endedAt = time.now();
  assert.equal(
    (await inner.claim("slow", options)).state,
    "in_flight",
    "a retry at the end of the handler must still find it in flight",
  );
  heartbeat.stop(beat);

  assert.deepEqual(problems, []);
  const marks = [claimedAt, ...extends_, endedAt];
  const gaps = marks.slice(1).map((at, i) => at - marks[i]!);
  assert.ok(extends_.length >= 2, `renewals at ${extends_}`);
  for (const gap of gaps) {
    assert.ok(
      gap < lease,
      `a gap of ${gap} ms between renewals (claim, renewals, end: ${
        marks.map((at) => at - claimedAt)
      }) lets a lease of ${lease} ms run out`,
    );
  }

  // The timer stops itself once no claim is left.
  await time.advanceTo(endedAt + lease, () => Promise.resolve());
  assert.equal(heartbeat.ticking, false);
  assert.equal(time.pending, 0);
});
