// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore against the MemoryStore as baseline, in `deno bench`: a new key
 * (claim + complete, two round trips) and a replay (claim, one round trip),
 * on the Redis at `REDIS_URL`. `bench/redis_compare.ts` adds p99, calls/s
 * with 32 in flight, counted round trips, and the peers.
 *
 *     deno task bench bench/redis_bench.ts
 *
 * @module
 */
import { createClient } from "redis";
import { MemoryStore, type StoredResponse } from "../mod.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { RedisStore } from "../src/stores/redis.ts";

const client = await createClient({
  url: Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379",
}).connect();
const prefix = `bench:${crypto.randomUUID().slice(0, 8)}:`;
const options = { fingerprint: "f".repeat(64), leaseMs: 30_000, ttlMs: 60_000 };
const record: StoredResponse = {
  status: 201,
  headers: [["content-type", "application/json"]],
  body: new TextEncoder().encode('{"id":"pay_1","status":"succeeded"}'),
};

async function fresh(store: IdempotencyStore, slot: string) {
  const claim = await store.claim(slot, options);
  if (claim.state === "acquired") {
    await store.complete(slot, claim.token, record);
  }
}

const stores = {
  memory: new MemoryStore(),
  redis: new RedisStore({ client, prefix, timeoutMs: 5_000 }),
};
for (const store of Object.values(stores)) await fresh(store, "replayed");
let n = 0;

Deno.bench(
  { name: "MemoryStore: new key", group: "new key", baseline: true },
  async () => {
    await fresh(stores.memory, `k${n++}`);
  },
);
Deno.bench(
  { name: "RedisStore: new key", group: "new key" },
  async () => {
    await fresh(stores.redis, `k${n++}`);
  },
);
Deno.bench(
  { name: "MemoryStore: replay", group: "replay", baseline: true },
  async () => {
    await stores.memory.claim("replayed", options);
  },
);
Deno.bench({ name: "RedisStore: replay", group: "replay" }, async () => {
  await stores.redis.claim("replayed", options);
});

globalThis.addEventListener("unload", () => {
  // Best effort: the bench's keys expire with their TTL anyway.
  client.destroy();
});
