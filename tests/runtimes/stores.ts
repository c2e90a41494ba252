// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The protocol cases on the networked stores over their npm drivers:
 * RedisStore over node-redis and over ioredis, PostgresStore over
 * postgres.js. Shared by the Node/Bun entry and the workerd worker.
 *
 * @module
 */
import { Redis } from "ioredis";
import postgres from "postgres";
import { createClient } from "redis";
import { PostgresStore } from "@idempotent/http/postgres";
import { RedisStore } from "@idempotent/http/redis";
import { type Check, protocolCases } from "./smoke.ts";

/**
 * Runs the protocol cases on each networked store, under Redis keys and a
 * PostgreSQL table named after `prefix`, and removes them afterwards.
 *
 * @param redisUrl Where Redis listens.
 * @param databaseUrl The PostgreSQL database.
 * @param prefix Unique to this run: a key prefix and a table name.
 * @returns The checks of every store.
 */
export async function storeCases(
  redisUrl: string,
  databaseUrl: string,
  prefix: string,
): Promise<Check[]> {
  const checks: Check[] = [];
  const nodeRedis = await createClient({ url: redisUrl }).connect();
  const ioredis = new Redis(redisUrl);
  const sql = postgres(databaseUrl, { onnotice: () => {} });
  try {
    checks.push(
      ...await protocolCases(
        "RedisStore (node-redis)",
        new RedisStore({ client: nodeRedis, prefix: `${prefix}:node-redis:` }),
      ),
      ...await protocolCases(
        "RedisStore (ioredis)",
        new RedisStore({ client: ioredis, prefix: `${prefix}:ioredis:` }),
      ),
    );
    const store = new PostgresStore({ sql, table: prefix });
    await store.migrate();
    checks.push(...await protocolCases("PostgresStore (postgres.js)", store));
  } finally {
    for await (const keys of nodeRedis.scanIterator({ MATCH: `${prefix}:*` })) {
      if (keys.length > 0) await nodeRedis.del(keys);
    }
    await sql.unsafe(`DROP TABLE IF EXISTS "${prefix}"`);
    nodeRedis.destroy();
    ioredis.disconnect();
    await sql.end();
  }
  return checks;
}
