// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Cleaning up after tests and benchmarks that write to Redis.
 *
 * @module
 */
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
