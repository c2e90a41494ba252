// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MemoryStore operations, including the worst case: a claim on a store full
 * of live claims, which must be refused at once (O(log n)), not after a scan.
 *
 *     deno bench bench/memory_store_bench.ts
 *
 * @module
 */
import { MemoryStore } from "../mod.ts";

const options = { fingerprint: "fp", leaseMs: 60_000, ttlMs: 86_400_000 };
const body = new Uint8Array(64);

const fresh = new MemoryStore({ maxEntries: 10_000 });
let n = 0;
Deno.bench({
  name: "claim + complete, store at its bound",
  group: "memory",
  baseline: true,
}, async () => {
  const slot = `s${n++}`;
  const claim = await fresh.claim(slot, options);
  if (claim.state === "acquired") {
    await fresh.complete(slot, claim.token, { status: 200, headers: [], body });
  }
});

const replays = new MemoryStore();
const first = await replays.claim("r", options);
if (first.state === "acquired") {
  await replays.complete("r", first.token, { status: 200, headers: [], body });
}
Deno.bench(
  { name: "claim of a completed record (replay)", group: "memory" },
  async () => {
    await replays.claim("r", options);
  },
);

const full = new MemoryStore({ maxEntries: 10_000 });
for (let i = 0; i < 10_000; i++) await full.claim(`live${i}`, options);
Deno.bench({
  name: "claim refused by a store full of live claims",
  group: "memory",
}, async () => {
  await full.claim(`new${n++}`, options).catch(() => {});
});
