// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the FailoverStore tests share: claim options and responses, tokens,
 * a node-redis client and a PostgreSQL fallback on the services of this
 * machine, and a pair of MemoryStores that can be switched down.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import postgres from "postgres";
import { MemoryStore } from "../../src/stores/memory.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import {
  type FailoverEvent,
  FailoverStore,
} from "../../src/stores/failover.ts";
import {
  type ClaimOptions,
  type ClaimResult,
  type StoredResponse,
  StoreError,
  type StoreOperation,
} from "../../src/store.ts";
import {
  DATABASE_URL,
  POSTGRES_IGNORE,
  REDIS_IGNORE,
  uniquePrefix,
} from "../_support/services.ts";
import { StoreWrapper } from "../_support/stores.ts";

/** Why the tests on Redis and PostgreSQL are skipped, or false when they run. */
export const SERVICES_IGNORE: false | string = REDIS_IGNORE || POSTGRES_IGNORE;

/** A node-redis client. */
export type NodeRedis = ReturnType<typeof createClient>;

/** A postgres.js instance. */
type Sql = ReturnType<typeof postgres>;

/** Claim options with `fingerprint` and a 30 s lease, 60 s TTL. */
export const opts = (
  fingerprint: string,
  more: Partial<ClaimOptions> = {},
): ClaimOptions => ({ fingerprint, leaseMs: 30_000, ttlMs: 60_000, ...more });

/** A 201 response with `text` as its body. */
export const ok = (text: string): StoredResponse => ({
  status: 201,
  headers: [["content-type", "text/plain"]],
  body: new TextEncoder().encode(text),
});

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** The token of an acquired claim (asserts it was acquired). */
export function token(result: ClaimResult): string {
  assert.equal(
    result.state,
    "acquired",
    `expected acquired, got ${JSON.stringify(result)}`,
  );
  return (result as { token: string }).token;
}

/** A connected node-redis client that fails fast while the server is down. */
export async function nodeRedis(url: string): Promise<NodeRedis> {
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: { reconnectStrategy: () => 50, connectTimeout: 500 },
  });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** A postgres.js pool, quiet. */
export function pg(
  url: string = DATABASE_URL,
  more: Record<string, unknown> = {},
): Sql {
  return postgres(url, { onnotice: () => {}, ...more });
}

/** A PostgresStore on a fresh schema, and how to drop it. */
export async function pgFallback(): Promise<{
  store: PostgresStore;
  sql: Sql;
  drop(): Promise<void>;
}> {
  const sql = pg(DATABASE_URL, { max: 10 });
  const schema = uniquePrefix("failover");
  await sql.unsafe(`CREATE SCHEMA ${quote(schema)}`);
  const store = new PostgresStore({ sql, table: `${schema}.idempotency_keys` });
  await store.migrate();
  return {
    store,
    sql,
    async drop() {
      try {
        await sql.unsafe(`DROP SCHEMA ${quote(schema)} CASCADE`);
      } finally {
        await sql.end();
      }
    },
  };
}

/** A store that throws like an unreachable one while `down` (unit tests only). */
export class Switchable extends StoreWrapper {
  down = false;
  calls = 0;

  protected override around<T>(
    operation: StoreOperation,
    _slot: string,
    run: () => Promise<T>,
  ): Promise<T> {
    this.calls++;
    if (this.down) {
      return Promise.reject(
        new StoreError(`${operation}: ECONNREFUSED`, {
          operation,
          cause: new Error("ECONNREFUSED"),
        }),
      );
    }
    return run();
  }
}

/** A FailoverStore on two Switchable MemoryStores, and its events. */
export function memoryPair(): {
  primary: Switchable;
  fallback: Switchable;
  events: FailoverEvent[];
  store: FailoverStore;
} {
  const primary = new Switchable(new MemoryStore());
  const fallback = new Switchable(new MemoryStore());
  const events: FailoverEvent[] = [];
  const store = new FailoverStore({
    primary,
    fallback,
    onEvent: (e) => events.push(e),
  });
  return { primary, fallback, events, store };
}
