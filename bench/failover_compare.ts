// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What a FailoverStore (RedisStore primary, PostgresStore fallback) costs per
 * request, against each store alone: a fresh key (claim + complete), a
 * replay (one claim), a claim during a Redis outage (a client whose commands
 * fail at once), and the first retry after recovery of a key first seen in
 * the outage. Prints p50/p99 in microseconds and the round trips each store
 * was sent per request.
 *
 * ```sh
 * deno run --allow-net --allow-env --allow-read bench/failover_compare.ts [iterations]
 * ```
 *
 * It uses a key prefix and a schema of its own, removed at the end.
 *
 * @module
 */

import postgres from "postgres";
import { createClient } from "redis";
import { PostgresStore } from "../src/stores/postgres.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import type {
  ClaimOptions,
  IdempotencyStore,
  StoredResponse,
  StoreOperation,
} from "../src/store.ts";
import {
  DATABASE_URL,
  REDIS_URL,
  uniquePrefix,
} from "../tests/_support/services.ts";
import { deleteRedisKeys } from "../tests/_support/redis.ts";
import { StoreWrapper } from "../tests/_support/stores.ts";
import { type Case, ratio, timedCase } from "./_measure.ts";

const iterations = Number(Deno.args[0] ?? 2000);
const warmup = Math.max(50, Math.floor(iterations / 10));

const response: StoredResponse = {
  status: 201,
  headers: [["content-type", "application/json"], ["set-cookie", "a=1"]],
  body: new TextEncoder().encode(
    JSON.stringify({ id: 1, note: "x".repeat(200) }),
  ),
};
const options: ClaimOptions = {
  fingerprint: "f".repeat(64),
  leaseMs: 30_000,
  ttlMs: 86_400_000,
};

/** Counts the operations (each one round trip) sent to a store. */
class Counted extends StoreWrapper {
  calls = 0;
  protected override around<T>(
    _operation: StoreOperation,
    _slot: string,
    run: () => Promise<T>,
  ): Promise<T> {
    this.calls++;
    return run();
  }
}

const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
const client = createClient({ url: REDIS_URL });
client.on("error", () => {});
await client.connect();
const dead = createClient({
  url: "redis://127.0.0.1:1",
  disableOfflineQueue: true,
  socket: { reconnectStrategy: () => 1000 },
});
dead.on("error", () => {});
const connecting = dead.connect().catch(() => {});
const schema = uniquePrefix("failbench");
const prefix = `${uniquePrefix("failbench")}:`;

const redis = new Counted(new RedisStore({ client, prefix }));
const pg = new Counted(
  new PostgresStore({ sql, table: `${schema}.idempotency_keys` }),
);
const failover = new FailoverStore({ primary: redis, fallback: pg });
const outage = new FailoverStore({
  primary: new Counted(new RedisStore({ client: dead, prefix })),
  fallback: pg,
});

function measure(
  name: string,
  op: (i: number) => Promise<unknown>,
): Promise<Case> {
  const counters = { redis: () => redis.calls, postgres: () => pg.calls };
  return timedCase(name, op, { iterations, warmup, counters });
}

async function fresh(store: IdempotencyStore, slot: string): Promise<void> {
  const claim = await store.claim(slot, options);
  if (claim.state !== "acquired") throw new Error(`not acquired: ${slot}`);
  await store.complete(slot, claim.token, response);
}

async function replay(store: IdempotencyStore, slot: string): Promise<void> {
  if ((await store.claim(slot, options)).state !== "completed") {
    throw new Error(`not a replay: ${slot}`);
  }
}

try {
  await sql.unsafe(`CREATE SCHEMA "${schema}"`);
  await (pg.inner as PostgresStore).migrate();
  const run = crypto.randomUUID().slice(0, 8);
  for (const [store, slot] of [[redis, "r"], [pg, "p"], [failover, "f"]]) {
    await fresh(store as IdempotencyStore, `${run}:replayed:${slot}`);
  }

  const results: Case[] = [];
  for (
    const [label, store] of [["RedisStore", redis], ["PostgresStore", pg], [
      "FailoverStore",
      failover,
    ]] as const
  ) {
    results.push(
      await measure(
        `${label}: fresh key (claim + complete)`,
        (i) => fresh(store, `${run}:${label}:${i}`),
      ),
    );
  }
  for (
    const [label, store, s] of [["RedisStore", redis, "r"], [
      "PostgresStore",
      pg,
      "p",
    ], ["FailoverStore", failover, "f"]] as const
  ) {
    results.push(
      await measure(
        `${label}: replay (claim)`,
        () => replay(store, `${run}:replayed:${s}`),
      ),
    );
  }
  results.push(
    await measure(
      "FailoverStore, Redis down: fresh key",
      (i) => fresh(outage, `${run}:outage:${i}`),
    ),
  );
  results.push(
    await measure(
      "FailoverStore, Redis back: first retry of an outage key",
      (i) => replay(failover, `${run}:outage:${i}`),
    ),
  );
  results.push(
    await measure(
      "FailoverStore: the retry after that (copied)",
      (i) => replay(failover, `${run}:outage:${i}`),
    ),
  );

  const base = results[0]!;
  // deno-lint-ignore no-console
  console.table(results.map((r) => ({
    case: r.name,
    "p50 µs": Math.round(r.p50),
    "p99 µs": Math.round(r.p99),
    "p50 × RedisStore fresh": ratio(r.p50, base.p50),
    "Redis ops": r.per.redis,
    "Postgres ops": r.per.postgres,
  })));
  // deno-lint-ignore no-console
  console.log(
    `${iterations} iterations after ${warmup} warm-up, one connection each, ${navigator.hardwareConcurrency} cores`,
  );
} finally {
  await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await sql.end();
  await deleteRedisKeys(prefix);
  client.destroy();
  dead.destroy();
  await connecting;
}
