// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MemoryStore operations, including the worst case: a claim on a store full
 * of live claims, which must be refused at once (O(log n)), not after a scan.
 * The "as the middleware" cases use what it passes: 64-character hex slots
 * and fingerprints, and a header list per response.
 *
 *     deno bench bench/memory_store_bench.ts
 *
 * @module
 */
import { MemoryStore } from "../mod.ts";
import { sha256Hex } from "../src/_sha256.ts";

const options = { fingerprint: "fp", leaseMs: 60_000, ttlMs: 86_400_000 };
const body = new Uint8Array(64);
const large = new Uint8Array(4_096);
const headers = (): [string, string][] => [
  ["content-type", "application/json"],
];
// Hashed ahead of time, so that the bench times the store, not the hash.
const slots = Array.from({ length: 65_536 }, (_, i) => sha256Hex("s", `${i}`));
const prints = Array.from({ length: 65_536 }, (_, i) => sha256Hex("f", `${i}`));

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

const middleware = new MemoryStore({ maxEntries: 10_000 });
let m = 0;
Deno.bench({
  name: "claim + complete as the middleware, store at its bound",
  group: "memory",
}, async () => {
  // A slot comes round after 65,536 calls, long after it was evicted.
  const i = m++ % 65_536;
  const slot = slots[i]!;
  const claim = await middleware.claim(slot, {
    ...options,
    fingerprint: prints[i]!,
  });
  if (claim.state === "acquired") {
    await middleware.complete(slot, claim.token, {
      status: 200,
      headers: headers(),
      body,
    });
  }
});

async function completed(body: Uint8Array): Promise<MemoryStore> {
  const store = new MemoryStore();
  const first = await store.claim("r", options);
  if (first.state === "acquired") {
    await store.complete("r", first.token, {
      status: 200,
      headers: headers(),
      body,
    });
  }
  return store;
}
const replays = await completed(body);
Deno.bench(
  {
    name: "claim of a completed record (replay), 64-byte body",
    group: "memory",
  },
  async () => {
    await replays.claim("r", options);
  },
);
const largeReplays = await completed(large);
Deno.bench(
  { name: "claim of a completed record (replay), 4 KiB body", group: "memory" },
  async () => {
    await largeReplays.claim("r", options);
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
