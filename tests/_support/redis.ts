// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Cleaning up after tests and benchmarks that write to Redis.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createClient } from "redis";
import {
  integrationTest,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./services.ts";
import {
  completedRecord,
  decodeCompleted,
} from "../../src/stores/_redis_record.ts";

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

/**
 * A test on the shared Redis (ignored with the reason when it is down): a
 * node-redis client of its own and a key prefix of its own, the client
 * closed and the keys deleted afterwards, even on failure. Sanitizers off,
 * as for every test on a real client (see {@linkcode integrationTest}).
 *
 * @param name The test's name.
 * @param label What the prefix starts with.
 * @param fn The test, given the client and the prefix.
 */
export function redisTest(
  name: string,
  label: string,
  fn: (
    client: Awaited<ReturnType<ReturnType<typeof createClient>["connect"]>>,
    prefix: string,
  ) => Promise<void>,
): void {
  integrationTest(name, REDIS_IGNORE, async () => {
    const prefix = `${uniquePrefix(label)}:`;
    const client = await createClient({ url: REDIS_URL }).connect();
    try {
      await fn(client, prefix);
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  });
}

/** Sends one raw command: node-redis's `sendCommand`, or ioredis's `call`. */
export type SendCommand = (args: (string | Buffer)[]) => Promise<unknown>;

/**
 * Hashes, some shaped like the records of 0.1 (a hash per slot, version
 * "1", never published), all unreadable now: a key of another type.
 * `{future}` stands for a time an hour away.
 */
const POISON_HASHES: Record<string, Record<string, string>> = (() => {
  const flight = { v: "1", st: "f", fp: "x", tok: "t", lu: "1" };
  const done = { v: "1", st: "c", fp: "x", dl: "{future}", status: "200" };
  return {
    // A completed record cut off in its header JSON, with no body or reason.
    "hash_truncated": { ...done, hdr: '[["content-type","te' },
    // Its lease is long past: a store that read it as ours would take it over.
    "hash_future_version": { ...flight, v: "2", dl: "{future}" },
    // A hash with none of our fields.
    "foreign_hash": { owner: "someone else" },
    "missing_fields": { v: "1", st: "f", fp: "x" },
    "bad_numbers": { ...flight, lu: "soon", dl: "later" },
    "unknown_state": { ...flight, st: "z", dl: "{future}" },
    "hash_bad_status": { ...done, status: "abc", hdr: "[]", body: "x" },
    "hash_body_and_reason": { ...done, hdr: "[]", body: "x", om: "too_large" },
    "no_body_no_reason": { ...done, hdr: "[]" },
    "hash_headers_not_pairs": { ...done, hdr: '[["a"],{"b":1}]', body: "x" },
  };
})();

/** A token of the right shape: 36 characters of id, then the fingerprint "x". */
const TOKEN = `${"0".repeat(36)}x`;

/**
 * Unreadable strings near the record layout (`_redis_record.ts`). An
 * in-flight one's lease would be long past (`floor` above the TTL) if it
 * were read as ours: a store that did would take it over.
 */
export const REDIS_STRING_POISONS: Record<string, string> = {
  // A completed record cut off in its header JSON.
  truncated: 'idem2c2001:x20:[["content-type","te',
  "body_cut_short": "idem2c2001:x2:[]5:abcd",
  "body_run_long": "idem2c2001:x2:[]3:abcd",
  "future_version": `idem3f999999999:${TOKEN}`,
  "unknown_state": `idem2z999999999:${TOKEN}`,
  "bad_floor": `idem2fsoon:${TOKEN}`,
  "short_token": "idem2f999999999:abc",
  "bad_status": "idem2cabc1:x2:[]1:x",
  "status_out_of_range": "idem2c1001:x2:[]1:x",
  "length_past_end": "idem2c2001:x99:[]1:x",
  "bad_length": "idem2c2001:x2x:[]1:x",
  "body_and_reason": "idem2c2001:x2:[]too_large:x",
  "unknown_reason": "idem2c2001:x2:[]lost:",
  "headers_not_pairs": 'idem2c2001:x15:[["a"],{"b":1}]1:x',
  "headers_not_json": "idem2c2001:x2:[[1:x",
  "header_not_http": 'idem2c2001:x14:[["a b","\\n"]]1:x',
};

/** Values of other Redis types than a hash, or no hash at all. */
const POISON_VALUES: Record<string, (key: string) => (string | Buffer)[]> = {
  ...Object.fromEntries(
    Object.entries(REDIS_STRING_POISONS).map((
      [kind, value],
    ) => [kind, (key: string) => ["SET", key, value]]),
  ),
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

/** The part of a node-redis client the record helpers below use. */
interface NodeRedisSend {
  sendCommand(
    args: string[] | (string | Buffer)[],
    options?: { typeMapping?: Record<number, unknown> },
  ): Promise<unknown>;
}

/** node-redis's RESP type code of a bulk string, answered as a `Buffer`. */
const AS_BYTES = { typeMapping: { 36: Buffer } };

/**
 * The state of the RedisStore record at `key`: "f" (in flight), "c"
 * (completed), or `null` (absent, or no record of ours).
 *
 * @param client A node-redis client.
 * @param key The full key.
 */
export async function redisRecordState(
  client: NodeRedisSend,
  key: string,
): Promise<"f" | "c" | null> {
  const value = await client.sendCommand(["GET", key], AS_BYTES);
  if (!(value instanceof Uint8Array)) return null;
  const head = new TextDecoder().decode(value.subarray(0, 6));
  return head === "idem2f" ? "f" : head === "idem2c" ? "c" : null;
}

/**
 * Replaces the header list of the completed RedisStore record at `key` with
 * `headers`, whatever they hold (to plant damage), keeping the rest and the
 * key's TTL.
 *
 * @param client A node-redis client.
 * @param key The full key.
 * @param headers The new list, written as it is.
 */
export async function setRedisRecordHeaders(
  client: NodeRedisSend,
  key: string,
  headers: unknown,
): Promise<void> {
  const value = await client.sendCommand(["GET", key], AS_BYTES);
  if (!(value instanceof Uint8Array)) throw new Error(`no record at ${key}`);
  const record = decodeCompleted(value);
  if (record === null) throw new Error(`no completed record at ${key}`);
  const forged = completedRecord(`${"0".repeat(36)}${record.fingerprint}`, {
    ...record.response,
    headers: headers as [string, string][],
  })!;
  await client.sendCommand(["SET", key, forged, "KEEPTTL"]);
}
