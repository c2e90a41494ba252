// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The smoke run on Node and Bun (bundled by tests/runtimes_test.ts with the
 * drivers left as npm imports, as a Node user installs them). Prints the
 * checks as one JSON line. `node main.mjs core` runs the protocol cases on
 * MemoryStore; `node main.mjs stores REDIS_URL DATABASE_URL PREFIX` runs them
 * on RedisStore (node-redis and ioredis) and PostgresStore (postgres.js),
 * under keys and a table named after PREFIX, and removes them afterwards.
 *
 * @module
 */
import process from "node:process";
import { Redis } from "ioredis";
import postgres from "postgres";
import { createClient } from "redis";
import { PostgresStore } from "@idempotent/http/postgres";
import { RedisStore } from "@idempotent/http/redis";
import { type Check, protocolCases } from "./smoke.ts";

async function stores(
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
    for await (
      const keys of nodeRedis.scanIterator({ MATCH: `${prefix}:*` })
    ) {
      if (keys.length > 0) await nodeRedis.del(keys);
    }
    await sql.unsafe(`DROP TABLE IF EXISTS "${prefix}"`);
    nodeRedis.destroy();
    ioredis.disconnect();
    await sql.end();
  }
  return checks;
}

const [mode = "core", redisUrl = "", databaseUrl = "", prefix = ""] = process
  .argv.slice(2);
const checks = mode === "stores"
  ? await stores(redisUrl, databaseUrl, prefix)
  : await protocolCases("MemoryStore");
process.stdout.write(JSON.stringify(checks) + "\n");
