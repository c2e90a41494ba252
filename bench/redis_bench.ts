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
import { MemoryStore } from "../mod.ts";
import { claimOptions, freshKey } from "./_app.ts";
import { RedisStore } from "../src/stores/redis.ts";

const client = await createClient({
  url: Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379",
}).connect();
const prefix = `bench:${crypto.randomUUID().slice(0, 8)}:`;
const stores = {
  memory: new MemoryStore(),
  redis: new RedisStore({ client, prefix, timeoutMs: 5_000 }),
};
for (const store of Object.values(stores)) await freshKey(store, "replayed");
let n = 0;

Deno.bench(
  { name: "MemoryStore: new key", group: "new key", baseline: true },
  async () => {
    await freshKey(stores.memory, `k${n++}`);
  },
);
Deno.bench(
  { name: "RedisStore: new key", group: "new key" },
  async () => {
    await freshKey(stores.redis, `k${n++}`);
  },
);
Deno.bench(
  { name: "MemoryStore: replay", group: "replay", baseline: true },
  async () => {
    await stores.memory.claim("replayed", claimOptions);
  },
);
Deno.bench({ name: "RedisStore: replay", group: "replay" }, async () => {
  await stores.redis.claim("replayed", claimOptions);
});

globalThis.addEventListener("unload", () => {
  // Best effort: the bench's keys expire with their TTL anyway.
  client.destroy();
});
