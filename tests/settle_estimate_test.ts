// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The 409's `Retry-After`: 1 s (`FIRST_SETTLE_MS`) until this middleware has
 * seen how long its requests take, then that estimate minus what the holder
 * has run, within [1 s, rest of the lease].
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency } from "../src/idempotency.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { SettleEstimate } from "../src/_settle_estimate.ts";
import { post } from "./_support/http.ts";

Deno.test("SettleEstimate with nothing observed answers 1 s, not the rest of the lease", () => {
  const estimate = new SettleEstimate();
  assert.equal(estimate.retryAfterSeconds(1_500, 8_500), 1);
  assert.equal(estimate.retryAfterSeconds(30_000, 0), 1);
  assert.equal(estimate.retryAfterSeconds(1, 29_999), 1);
  // The first observation moves it: a 5 s run, 15 s expected.
  estimate.observe(5_000);
  assert.equal(estimate.retryAfterSeconds(30_000, 0), 15);
});

Deno.test("SettleEstimate answers the expected rest of a run, within [1 s, rest of the lease]", () => {
  const estimate = new SettleEstimate();
  estimate.observe(500); // mean 500, deviation 250: expect up to 1,500 ms
  assert.equal(estimate.retryAfterSeconds(29_800, 200), 2); // 1,300 ms left
  assert.equal(estimate.retryAfterSeconds(28_000, 2_000), 1); // overdue: 1 s
  assert.equal(estimate.retryAfterSeconds(600, 29_400), 1); // lease nearly out
  for (let i = 0; i < 50; i++) estimate.observe(500); // steady: deviation → 0
  assert.equal(estimate.retryAfterSeconds(30_000, 0), 1);
  estimate.observe(Number.NaN); // ignored
  estimate.observe(-5); // ignored
  assert.equal(estimate.retryAfterSeconds(30_000, 0), 1);

  const slow = new SettleEstimate();
  slow.observe(120_000); // longer than the lease: the lease bounds the hint
  assert.equal(slow.retryAfterSeconds(12_300, 17_700), 13);
  slow.observe(4_000);
  // mean 105,500, deviation 74,000: still past the rest of the lease
  assert.equal(slow.retryAfterSeconds(9_000, 21_000), 9);
});

Deno.test("idempotency() 409: Retry-After is 1 s until a run was observed, then the observed run time", async () => {
  let now = 1_000_000;
  const store = new MemoryStore({ clock: () => now });
  let release = () => {};
  const held = new Promise<void>((resolve) => release = resolve);
  let holding = () => {};
  const holds = new Promise<void>((resolve) => holding = resolve);
  const guarded = idempotency(async (req) => {
    if (new URL(req.url).pathname === "/slow") {
      holding();
      await held;
    }
    return new Response("done", { status: 201 });
  }, { scope: "global", store });

  const holder = guarded(post("held", "{}", { path: "/slow" }));
  await holds;
  const first = await guarded(post("held", "{}", { path: "/slow" }));
  await first.body?.cancel();
  assert.equal(first.status, 409);
  assert.equal(first.headers.get("retry-after"), "1", "nothing observed yet");

  now += 8_500;
  const later = await guarded(post("held", "{}", { path: "/slow" }));
  await later.body?.cancel();
  assert.equal(later.headers.get("retry-after"), "1");

  // One quick request runs to the end: the middleware has seen one run.
  const outer = performance.now();
  const quick = await guarded(post("quick"));
  await quick.text();
  const observedAtMost = performance.now() - outer;

  const hinted = await guarded(post("held", "{}", { path: "/slow" }));
  await hinted.body?.cancel();
  assert.equal(hinted.status, 409);
  // The estimate of one observation d is 3·d (mean d, deviation d/2), so the
  // hint is at most that, whatever this machine's speed, and at least 1.
  const seconds = Number(hinted.headers.get("retry-after"));
  assert.ok(seconds >= 1);
  assert.ok(
    seconds <= Math.max(1, Math.ceil(3 * observedAtMost / 1000)),
    `Retry-After ${seconds} for a run observed at most ${observedAtMost} ms`,
  );

  release();
  assert.equal((await holder).status, 201);
});

Deno.test("SettleEstimate reads mean + 4 × deviation at the second's boundaries", () => {
  const one = new SettleEstimate();
  one.observe(1_000); // mean 1,000, deviation 500: 3,000 ms expected
  assert.equal(one.retryAfterSeconds(30_000, 999), 3); // 2,001 ms left
  assert.equal(one.retryAfterSeconds(30_000, 1_000), 2); // 2,000 ms left
  assert.equal(one.retryAfterSeconds(30_000, 1_999), 2); // 1,001 ms left
  assert.equal(one.retryAfterSeconds(30_000, 2_000), 1); // the 1 s floor
  // The rest of the lease bounds it: 1,999, 2,000, 2,001 ms.
  assert.equal(one.retryAfterSeconds(1_999, 0), 2);
  assert.equal(one.retryAfterSeconds(2_000, 0), 2);
  assert.equal(one.retryAfterSeconds(2_001, 0), 3);

  // Gains 1/8 and 1/4: mean 1,125, deviation 625, 3,625 ms expected.
  one.observe(2_000);
  assert.equal(one.retryAfterSeconds(30_000, 624), 4);
  assert.equal(one.retryAfterSeconds(30_000, 625), 3);

  // A run of 0 ms is an observation: the next one moves the mean from 0
  // (625 ms, deviation 1,250: 5,625 ms), not from nothing (5 s: 15 s).
  const instant = new SettleEstimate();
  instant.observe(0);
  assert.equal(instant.retryAfterSeconds(30_000, 0), 1);
  instant.observe(5_000);
  assert.equal(instant.retryAfterSeconds(30_000, 0), 6);
});
