// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the RedisStore tests share: the clients they run on (node-redis,
 * ioredis, ioredis auto-pipelining), an admin connection, the claim options,
 * and how to tell the release script among the commands a stub receives.
 *
 * @module
 */

import { createClient } from "redis";
import { Redis } from "ioredis";
import type { RedisClientLike } from "../../src/stores/redis.ts";
import { SCRIPTS } from "../../src/stores/_redis_scripts.ts";
import { REDIS_IGNORE, REDIS_URL } from "../_support/services.ts";
import { plantRedisPoison } from "../_support/redis.ts";

/** Whether `args` is the release script (its token is `args[4]`). */
export function isRelease(args: (string | Uint8Array)[]): boolean {
  return args[0] === "EVALSHA" && args[1] === SCRIPTS.release.sha;
}

/** Why the tests on the real Redis are skipped, or false when they run. */
export const ignore = REDIS_IGNORE;

/** The claim options of most tests. */
export const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };

/** A node-redis client. */
type NodeRedis = ReturnType<typeof createClient>;

/** A connected node-redis client on the Redis of this machine. */
async function nodeRedis(): Promise<NodeRedis> {
  const client = createClient({ url: REDIS_URL });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** An ioredis client on the Redis of this machine. */
export function ioRedis(enableAutoPipelining = false): Redis {
  const client = new Redis(REDIS_URL, {
    lazyConnect: false,
    enableAutoPipelining,
  });
  client.on("error", () => {});
  return client;
}

/** A raw admin connection for planting values and cleaning up. */
export class Admin {
  readonly client: Redis = ioRedis();

  poison(key: string, kind: string): Promise<void> {
    return plantRedisPoison(
      (args) => this.client.call(args[0] as string, ...args.slice(1)),
      key,
      kind,
    );
  }

  close(): void {
    this.client.disconnect();
  }
}

/** A client and how to close it. */
interface Opened {
  client: RedisClientLike;
  close(): void;
}

/** Each client the tests run on, by name. */
export const clients: [string, () => Promise<Opened>][] = [
  ["node-redis", async () => {
    const client = await nodeRedis();
    return { client, close: () => client.destroy() };
  }],
  ["ioredis", () => {
    const client = ioRedis();
    return Promise.resolve({ client, close: () => client.disconnect() });
  }],
  // ioredis's callBuffer drops the command's name when auto-pipelining
  // (redis/ioredis#1923): the store sends through setBuffer, evalshaBuffer…
  ["ioredis, auto-pipelining", () => {
    const client = ioRedis(true);
    return Promise.resolve({ client, close: () => client.disconnect() });
  }],
];
