// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The heartbeat's renewal cadence, on fake time: a claim is renewed well
 * within its lease for as long as its handler runs, so a retry can never take
 * over a handler that is still working.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Heartbeat } from "../src/_heartbeat.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { FakeClock } from "./_support/time.ts";

Deno.test("Heartbeat renews a claim every third of its lease for as long as the handler runs", async () => {
  const lease = 150;
  const handlerMs = 700;
  const time = new FakeClock();
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

Deno.test("Heartbeat renews exactly the claims not stopped, whatever order they stop in", async () => {
  // The beats are a list unlinked anywhere as claims stop, some twice; a
  // model says which are left: those, and only those, are renewed.
  const fc = (await import("fast-check")).default;
  const lease = 600;
  const step = fc.oneof(
    fc.constant({ start: true as const }),
    fc.record({ stop: fc.nat(), twice: fc.boolean() }),
  );
  await fc.assert(
    fc.asyncProperty(
      fc.array(step, { minLength: 1, maxLength: 40 }),
      async (steps) => {
        const time = new FakeClock();
        const renewed: string[] = [];
        const store: IdempotencyStore = {
          claim: () => Promise.reject(new Error("unused")),
          complete: () => Promise.reject(new Error("unused")),
          release: () => Promise.reject(new Error("unused")),
          extend: (slot) => {
            renewed.push(slot);
            return Promise.resolve("applied");
          },
        };
        const heartbeat = new Heartbeat(store, lease, {
          lost: () => {},
          error: () => {},
        }, time);
        const beats: ReturnType<Heartbeat["start"]>[] = [];
        const live: number[] = []; // the model
        for (const s of steps) {
          if ("start" in s) {
            live.push(beats.length);
            beats.push(heartbeat.start(`s${beats.length}`, "t"));
          } else if (beats.length > 0) {
            const i = s.stop % beats.length;
            heartbeat.stop(beats[i]!);
            if (s.twice) heartbeat.stop(beats[i]!);
            const at = live.indexOf(i);
            if (at >= 0) live.splice(at, 1);
          }
          assert.equal(heartbeat.size, live.length);
        }
        // Half a lease on: every claim left is due, and is renewed once.
        await time.advanceTo(time.now() + lease / 2);
        assert.deepEqual(renewed, live.map((i) => `s${i}`));
        for (const i of [...live]) heartbeat.stop(beats[i]!);
        assert.equal(heartbeat.size, 0);
        await time.advanceTo(time.now() + lease);
        assert.equal(heartbeat.ticking, false);
      },
    ),
    { numRuns: 200 },
  );
});

/** A heartbeat on fake time over a store that records when each renewal was asked. */
function recordedHeartbeat(lease: number) {
  const time = new FakeClock(0);
  const renewals: number[] = [];
  const store: IdempotencyStore = {
    claim: () => Promise.reject(new Error("unused")),
    complete: () => Promise.reject(new Error("unused")),
    release: () => Promise.reject(new Error("unused")),
    extend: () => {
      renewals.push(time.now());
      return Promise.resolve("applied");
    },
  };
  const heartbeat = new Heartbeat(store, lease, {
    lost: () => {},
    error: () => {},
  }, time);
  return { time, renewals, heartbeat };
}

Deno.test("heartbeat ticks every sixth of a lease and renews a claim a third of a lease old, not younger", async () => {
  // 600: ticks at 100, 200, ...; due at 200 exactly, so renewed at 200, 400, 600.
  // 601: ticks still every 100 (rounded down); due only past 200.33: at 300, 600.
  for (
    const [lease, expected] of [[600, [200, 400, 600]], [601, [
      300,
      600,
    ]]] as const
  ) {
    const { time, renewals, heartbeat } = recordedHeartbeat(lease);
    const beat = heartbeat.start("s", "t");
    await time.advanceTo(699);
    assert.deepEqual(renewals, expected, `lease ${lease}`);
    heartbeat.stop(beat);
  }
});

Deno.test("heartbeat ends a capture at the first tick a whole lease after it began, not before", async () => {
  const lease = 600; // ticks every 100
  for (const [begin, end] of [[0, 600], [50, 700]] as const) {
    const { time, heartbeat } = recordedHeartbeat(lease);
    const beat = heartbeat.start("s", "t");
    await time.advanceTo(begin);
    let ended = false;
    heartbeat.capturing(beat).then(() => ended = true);
    await time.advanceTo(end - 1);
    assert.equal(ended, false, `begun at ${begin}: still capturing`);
    await time.advanceTo(end);
    assert.equal(ended, true, `begun at ${begin}: cut off at ${end}`);
    heartbeat.stop(beat);
  }
});
