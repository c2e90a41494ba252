// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Cleaning up after tests and benchmarks that write to Redis.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createClient } from "redis";
import { REDIS_URL } from "./_services.ts";

/**
 * Deletes every key under `prefix` (SCAN, never FLUSHALL: others share the
 * server), over a connection of its own so any caller can use it.
 *
 * @param prefix What the keys start with.
 * @param url The Redis to clean.
 */
export async function deleteRedisKeys(
  prefix: string,
  url: string = REDIS_URL,
): Promise<void> {
  const client = await createClient({ url }).connect();
  try {
    for await (
      const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })
    ) {
      if (keys.length > 0) await client.del(keys);
    }
  } finally {
    client.destroy();
  }
}

/** Sends one raw command: node-redis's `sendCommand`, or ioredis's `call`. */
export type SendCommand = (args: (string | Buffer)[]) => Promise<unknown>;

/**
 * The hashes of the unreadable records a test plants: `{future}` stands for
 * a deadline an hour away.
 */
const POISON_HASHES: Record<string, Record<string, string>> = (() => {
  const flight = { v: "1", st: "f", fp: "x", tok: "t", lu: "1" };
  const done = { v: "1", st: "c", fp: "x", dl: "{future}", status: "200" };
  return {
    // A completed record cut off in its header JSON, with no body or reason.
    truncated: { ...done, hdr: '[["content-type","te' },
    // Its lease is long past: a store that read it as ours would take it over.
    "future_version": { ...flight, v: "2", dl: "{future}" },
    // A hash with none of our fields.
    "foreign_hash": { owner: "someone else" },
    "missing_fields": { v: "1", st: "f", fp: "x" },
    "bad_numbers": { ...flight, lu: "soon", dl: "later" },
    "unknown_state": { ...flight, st: "z", dl: "{future}" },
    "bad_status": { ...done, status: "abc", hdr: "[]", body: "x" },
    "body_and_reason": { ...done, hdr: "[]", body: "x", om: "too_large" },
    "no_body_no_reason": { ...done, hdr: "[]" },
    "headers_not_pairs": { ...done, hdr: '[["a"],{"b":1}]', body: "x" },
  };
})();

/** Values of other Redis types than a hash, or no hash at all. */
const POISON_VALUES: Record<string, (key: string) => (string | Buffer)[]> = {
  garbage: (
    key,
  ) => ["SET", key, Buffer.from(crypto.getRandomValues(new Uint8Array(64)))],
  list: (key) => ["RPUSH", key, "a", "b"],
  set: (key) => ["SADD", key, "a"],
  zset: (key) => ["ZADD", key, "1", "a"],
  stream: (key) => ["XADD", key, "*", "a", "1"],
};

/** Every kind {@linkcode plantRedisPoison} knows. */
export const REDIS_POISONS: string[] = [
  ...Object.keys(POISON_VALUES),
  ...Object.keys(POISON_HASHES),
];

/**
 * Replaces the value at `key` by an unreadable one of the given kind (the
 * conformance suite's `PoisonKind`s and more), expiring in two minutes so it
 * never outlives the run.
 *
 * @param send How to send a raw command.
 * @param key The full key.
 * @param kind Which poison.
 */
export async function plantRedisPoison(
  send: SendCommand,
  key: string,
  kind: string,
): Promise<void> {
  await send(["DEL", key]);
  const hash = POISON_HASHES[kind];
  const value = POISON_VALUES[kind];
  if (hash !== undefined) {
    const future = String(Date.now() + 3_600_000);
    const fields = Object.entries(hash).flatMap(([field, v]) => [
      field,
      v === "{future}" ? future : v,
    ]);
    await send(["HSET", key, ...fields]);
  } else if (value !== undefined) {
    await send(value(key));
  } else {
    throw new Error(`unknown poison ${kind}`);
  }
  await send(["PEXPIRE", key, "120000"]);
}
