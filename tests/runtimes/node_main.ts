// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The smoke run on Node and Bun (bundled by tests/runtimes_test.ts with the
 * drivers left as npm imports, as a Node user installs them). Prints the
 * checks as one JSON line. `node main.mjs core` runs the protocol cases on
 * MemoryStore; `node main.mjs stores REDIS_URL DATABASE_URL PREFIX` runs them
 * on RedisStore (node-redis and ioredis) and PostgresStore (postgres.js).
 *
 * @module
 */
import process from "node:process";
import { protocolCases } from "./smoke.ts";
import { storeCases } from "./stores.ts";

const [mode = "core", redisUrl = "", databaseUrl = "", prefix = ""] = process
  .argv.slice(2);
const checks = mode === "stores"
  ? await storeCases(redisUrl, databaseUrl, prefix)
  : await protocolCases("MemoryStore");
process.stdout.write(JSON.stringify(checks) + "\n");
