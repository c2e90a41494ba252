// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * FailoverStore.migrate() and a fallback that does not work, against the
 * Redis and PostgreSQL of this machine: a FailoverStore whose PostgreSQL
 * table was never created must not serve keys on Redis alone unnoticed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import postgres from "postgres";
import { idempotency } from "../../src/idempotency.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import {
  type FailoverEvent,
  FailoverStore,
} from "../../src/stores/failover.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import {
  DATABASE_URL,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "../_support/services.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import { post } from "../_support/http.ts";

const IGNORE = REDIS_IGNORE || POSTGRES_IGNORE;

Deno.test({
  name: testName(
    "FailoverStore without its PostgreSQL table answers 503 until migrate(), then records every key in PostgreSQL",
    IGNORE,
  ),
  ignore: IGNORE !== false,
  // node-redis and postgres.js keep timers for a while after they close.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const prefix = `${uniquePrefix("fomigrate")}:`;
    // A schema that does not exist yet: migrate() must create it too.
    const { sql, schema, drop } = await postgresSchema("fomigrate", {
      max: 2,
      create: false,
    });
    const table = `${schema}.idempotency_keys`;
    const client = createClient({ url: REDIS_URL, disableOfflineQueue: true });
    client.on("error", () => {});
    await client.connect();
    try {
      const failover: FailoverEvent[] = [];
      const store = new FailoverStore({
        primary: new RedisStore({ client, prefix, timeoutMs: 1000 }),
        fallback: new PostgresStore({ sql, table }),
        onEvent: (event) => failover.push(event),
      });
      let runs = 0;
      const errors: string[] = [];
      const handler = idempotency(() => {
        runs++;
        return new Response(`run ${runs}`, { status: 201 });
      }, {
        scope: "global",
        store,
        onEvent: (event: IdempotencyEvent) => {
          if (event.type === "store_error") {
            errors.push((event.error as Error).message);
          }
        },
      });

      // As the README once wrote it: no migrate(). Loud, not silent.
      const refused = await handler(post("k-1"));
      await refused.body?.cancel();
      assert.equal(refused.status, 503);
      assert.equal(runs, 0);
      assert.match(errors[0] ?? "", /migrate\(\)/);
      assert.match(errors[0] ?? "", /does not exist/);
      assert.equal(failover[0]?.type, "fallback_unavailable");
      // The refused claim left nothing behind in Redis.
      assert.equal(await client.keys(`${prefix}*`).then((k) => k.length), 0);

      await store.migrate();
      failover.length = 0;
      const first = await handler(post("k-1"));
      assert.equal(first.status, 201);
      assert.equal(await first.text(), "run 1");
      const retry = await handler(post("k-1"));
      assert.equal(retry.headers.get("idempotent-replayed"), "true");
      assert.equal(await retry.text(), "run 1");
      assert.equal(runs, 1);
      assert.deepEqual(failover, []);
      // The durable copy is in PostgreSQL.
      const rows = await sql.unsafe(
        `SELECT state FROM "${schema}"."idempotency_keys"`,
      );
      assert.deepEqual(rows.map((r) => r.state), ["completed"]);
    } finally {
      await deleteRedisKeys(prefix).catch(() => {});
      client.destroy();
      await drop();
    }
  },
});

Deno.test({
  name: testName(
    "FailoverStore.migrate() throws when PostgreSQL refuses, so a deploy stops at boot",
    POSTGRES_IGNORE,
  ),
  ignore: POSTGRES_IGNORE !== false,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const role = uniquePrefix("forole");
    const admin = postgres(DATABASE_URL, { onnotice: () => {}, max: 1 });
    await admin.unsafe(`CREATE ROLE "${role}" LOGIN`);
    const url = new URL(DATABASE_URL);
    url.username = role;
    const sql = postgres(url.href, { onnotice: () => {}, max: 1 });
    try {
      const store = new FailoverStore({
        primary: new RedisStore({
          client: { sendCommand: () => Promise.reject(new Error("unused")) },
        }),
        // A role that may not create schemas.
        fallback: new PostgresStore({ sql, table: `${role}.keys` }),
      });
      await assert.rejects(store.migrate(), /permission denied/);
    } finally {
      await sql.end();
      await admin.unsafe(`DROP ROLE "${role}"`);
      await admin.end();
    }
  },
});
