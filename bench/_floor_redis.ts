// deno-lint-ignore-file no-console
/**
 * The floor under RedisStore on one node-redis connection at 32 in flight,
 * interleaved rounds, median: a bare GET, the commands a native claim would
 * send (`SET key value NX PX ttl GET` answering a ~150-byte completed
 * record), and RedisStore's replay and fresh key. Not part of the table:
 * the measurement behind bench/README.md's "floor" paragraph.
 *
 *     deno run -A bench/_floor_redis.ts [url] [rounds] [seconds]
 *
 * @module
 */
import { createClient } from "redis";
import { createHash } from "node:crypto";
import { RedisStore } from "../src/stores/redis.ts";
import { SCRIPTS } from "../src/stores/_redis_scripts.ts";
import { median, throughput } from "./_measure.ts";

const url = Deno.args[0] ?? "redis://127.0.0.1:6379";
const rounds = Number(Deno.args[1] ?? 5);
const seconds = Number(Deno.args[2] ?? 1);
const client = await createClient({ url }).connect();
const prefix = `floor_${Date.now().toString(36)}:`;
const store = new RedisStore({ client, prefix });
const sha = (t: string) => createHash("sha256").update(t).digest("hex");
const body = new TextEncoder().encode(
  '{"id":"pay_123","amount":1000,"currency":"eur"}',
);
const response = {
  status: 201,
  headers: [["content-type", "application/json"]] as [string, string][],
  body,
};
const opts = { fingerprint: sha("fp"), leaseMs: 30000, ttlMs: 600000 };
const value = "x".repeat(150);
for (let i = 0; i < 64; i++) {
  await client.set(`${prefix}n${i}`, value, { PX: 600000 });
  const c = await store.claim(sha(`r${i}`), opts);
  if (c.state === "acquired") {
    await store.complete(sha(`r${i}`), c.token, response);
  }
}
const replayKeys = Array.from({ length: 64 }, (_, i) => prefix + sha(`r${i}`));
let k = 0;
const cases: Record<string, (i: number) => Promise<unknown>> = {
  "GET": (i) => client.get(`${prefix}n${i % 64}`),
  "SET NX PX GET (replay, native)": (i) =>
    client.sendCommand([
      "SET",
      `${prefix}n${i % 64}`,
      "v",
      "NX",
      "PX",
      "600000",
      "GET",
    ]),
  "SET NX PX GET (fresh, native)": () =>
    client.sendCommand([
      "SET",
      `${prefix}f${k++}`,
      value,
      "NX",
      "PX",
      "600000",
      "GET",
    ]),
  "EVALSHA claim script, bare (replay)": (i) =>
    client.sendCommand([
      "EVALSHA",
      SCRIPTS.claim.sha,
      "1",
      replayKeys[i % 64]!,
      opts.fingerprint,
      "t",
      "30000",
      "600000",
    ]),
  "RedisStore replay (EVALSHA claim)": (i) =>
    store.claim(sha(`r${i % 64}`), opts),
  "RedisStore fresh (claim + complete)": async () => {
    const slot = sha(`f${k++}`);
    const c = await store.claim(slot, opts);
    if (c.state === "acquired") await store.complete(slot, c.token, response);
  },
};
const results: Record<string, number[]> = {};
for (let r = 0; r < rounds; r++) {
  for (const [name, fn] of Object.entries(cases)) {
    const t = await throughput(fn, seconds);
    (results[name] ??= []).push(t.done / t.seconds);
  }
}
const get = median(results["GET"]!);
for (const [name, list] of Object.entries(results)) {
  console.log(`${name}: ${(median(list) / get).toFixed(2)}× GET's calls/s`);
}
for await (
  const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })
) {
  if (keys.length) await client.del(keys);
}
client.destroy();
