// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Case 1 of the fault-injection suite: {@linkcode FaultyStore} in front of a
 * MemoryStore, a RedisStore and a PostgresStore (on the shared servers, under
 * a prefix / table of this run's own), through the middleware, with many
 * keys times duplicates, every operation failing in every way.
 *
 * Allowed: nothing. The documented crash window (a process that dies between
 * the effect and the completion) cannot happen in process, and no fault here
 * keeps the store unreachable for longer than the lease. A flaky key's first
 * run answers 500 (not cacheable, released): its second run is its first 2xx,
 * not a duplicate. Everything else counts as a failure: a second 2xx
 * execution of a key, an answer that is not the handler's bytes or a problem
 * document, a key that does not settle into a replay once the load is over.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { createClient } from "redis";
import { idempotency, type IdempotencyOptions } from "../../mod.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import {
  DATABASE_URL,
  POSTGRES_IGNORE,
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "../_support/services.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import { type FaultRule, FaultyStore } from "./_faulty_store.ts";
import {
  app,
  direct,
  duplicates,
  judge,
  Ledger,
  load,
  report,
  SEALING,
  settle,
  tally,
} from "./_load.ts";
import { waitFor } from "../_support/time.ts";

interface Scenario {
  name: string;
  rules: FaultRule[];
  lease?: number;
  /** Keys whose first run answers 500, so that `release` is exercised. */
  flaky?: boolean;
  /** Keys whose handler outlasts a renewal, so that `extend` is exercised. */
  slow?: boolean;
}

const SCENARIOS: Scenario[] = [
  {
    name: "complete throws once",
    rules: [{ operation: "complete", kind: "throw" }],
  },
  {
    name: "complete throws 5 times",
    rules: [{ operation: "complete", kind: "throw", times: 5, every: 7 }],
  },
  {
    name: "complete lands late (unknown outcome)",
    rules: [{ operation: "complete", kind: "late", times: 5, every: 5 }],
  },
  {
    name: "complete hangs until released",
    rules: [{ operation: "complete", kind: "hang", times: 4, every: 9 }],
  },
  {
    name: "claim throws, lands late, hangs",
    rules: [
      { operation: "claim", kind: "throw", times: 5, every: 11 },
      { operation: "claim", kind: "late", times: 5, every: 13 },
      { operation: "claim", kind: "hang", times: 3, every: 17 },
    ],
  },
  {
    name: "release throws, lands late, is lost, hangs",
    flaky: true,
    rules: [
      { operation: "release", kind: "throw", times: 2, every: 2 },
      { operation: "release", kind: "late", times: 2, every: 3 },
      { operation: "release", kind: "lost", times: 2, every: 4 },
      { operation: "release", kind: "hang", times: 2, every: 5 },
    ],
  },
  {
    name: "extend throws, lands late, is lost, hangs",
    slow: true,
    lease: 1500,
    rules: [
      { operation: "extend", kind: "throw", times: 3, every: 2 },
      { operation: "extend", kind: "late", times: 3, every: 3 },
      { operation: "extend", kind: "lost", times: 3, every: 4 },
      { operation: "extend", kind: "hang", times: 3, every: 5 },
    ],
  },
];

/**
 * Waits for the next `extend` call: the heartbeat's timer does not hold the
 * event loop open, so an interval does while the handler waits.
 */
async function renewal(faulty: FaultyStore): Promise<void> {
  const keepAlive = setInterval(() => {}, 1000);
  try {
    await faulty.next("extend");
  } finally {
    clearInterval(keepAlive);
  }
}

const KEYS = 48;
const DUPLICATES = 3;
const CONCURRENCY = 16;

/** Runs every scenario on fresh stores made by `make`; returns the failures. */
async function runScenarios(
  label: string,
  make: (scenario: number) => Promise<IdempotencyStore>,
  options: Partial<IdempotencyOptions> = {},
): Promise<string[]> {
  const failures: string[] = [];
  for (const [index, scenario] of SCENARIOS.entries()) {
    const lease = scenario.lease ?? 1000;
    const faulty = new FaultyStore(await make(index), scenario.rules);
    const ledger = new Ledger();
    const events: IdempotencyEvent[] = [];
    const keys = Array.from(
      { length: KEYS },
      (_, i) => `${label}-${index}-k${i}`,
    );
    const flaky = (key: string) =>
      scenario.flaky === true && Number(key.split("k").at(-1)) % 3 === 0;
    const slow = (key: string) =>
      scenario.slow === true && Number(key.split("k").at(-1)) % 2 === 0;
    const handler = idempotency(
      app(ledger, {
        flaky,
        hold: (key) => slow(key) ? renewal(faulty) : undefined,
      }),
      {
        ...SEALING,
        scope: "global",
        store: faulty,
        lease,
        ttl: 600_000,
        onEvent: (e) => events.push(e),
        ...options,
      },
    );
    const send = direct(handler);
    // Lets hung calls go as soon as they hang (after the event loop has
    // had a turn, so that duplicates meet the hung claim).
    let loading = true;
    const finished = Promise.withResolvers<void>();
    const driver = (async () => {
      while (loading) {
        await Promise.race([faulty.next("hang"), finished.promise]);
        await new Promise((r) => setTimeout(r, 5));
        faulty.releaseHung();
      }
    })();
    const seen = tally();
    try {
      await load(send, ledger, {
        keys,
        duplicates: DUPLICATES,
        concurrency: CONCURRENCY,
      }, seen);
      const settled = await settle(send, ledger, keys, lease * 4 + 5000, seen);
      faulty.clear();
      // The background work of the middleware (if any) ends in the store.
      await waitFor("hung calls to be gone", () => faulty.hanging === 0);
      const dup = duplicates(ledger);
      const figures = {
        requests: seen.requests,
        faults: faulty.injected,
        executions: ledger.total,
        duplicates: dup.count,
        altered: seen.altered.length,
        stuck: settled.stuck.length,
        statuses: seen.statuses,
      };
      report(`${label} / ${scenario.name}`, figures);
      if (faulty.faults === 0) {
        failures.push(`${scenario.name}: no fault fired`);
      }
      if (dup.count > 0) {
        failures.push(
          `${scenario.name}: ${dup.count} duplicate executions (${
            dup.keys.slice(0, 5).join(", ")
          })`,
        );
      }
      if (seen.altered.length > 0) {
        failures.push(
          `${scenario.name}: altered answers ${
            seen.altered.slice(0, 3).join(" | ")
          }`,
        );
      }
      if (settled.stuck.length > 0) {
        failures.push(
          `${scenario.name}: stuck keys ${
            settled.stuck.slice(0, 3).join(", ")
          }`,
        );
      }
    } finally {
      loading = false;
      finished.resolve();
      faulty.releaseHung();
      await driver;
    }
  }
  return failures;
}

/**
 * A `complete` that answers `lost` (the owner was fenced out): the client
 * still gets the handler's bytes, the event says `lost`, and a retry after
 * the lease may run again. That second run is allowed: the store said
 * another owner has the slot, so this one's completion must not land.
 */
async function completeLost(
  label: string,
  inner: IdempotencyStore,
): Promise<void> {
  const faulty = new FaultyStore(inner, [
    { operation: "complete", kind: "lost" },
  ]);
  const ledger = new Ledger();
  const events: IdempotencyEvent[] = [];
  const send = direct(
    idempotency(app(ledger), {
      ...SEALING,
      scope: "global",
      store: faulty,
      lease: 200,
      onEvent: (e) => events.push(e),
    }),
  );
  const key = `${label}-lost`;
  const seen = tally();
  assert.equal(await judge(ledger, key, await send(key), seen), "live");
  const completed = events.find((e) => e.type === "completed");
  assert.equal(completed?.type === "completed" && completed.outcome, "lost");
  const settled = await settle(send, ledger, [key], 10_000, seen);
  assert.deepEqual(settled.stuck, []);
  assert.deepEqual(seen.altered, []);
  const runs = ledger.of(key).length;
  assert.ok(runs <= 2, `${runs} runs`);
  report(`${label} / complete is lost`, {
    faults: faulty.injected,
    executions: runs,
    allowedReruns: runs - 1,
    altered: 0,
  });
}

Deno.test("faults: FaultyStore over MemoryStore, every operation and outcome, many keys times duplicates", async () => {
  const failures = await runScenarios(
    "memory",
    () => Promise.resolve(new MemoryStore()),
  );
  await completeLost("memory", new MemoryStore());
  assert.deepEqual(failures, []);
});

Deno.test("faults: FaultyStore over MemoryStore with sealed records, every operation and outcome", async () => {
  const key = await crypto.subtle.generateKey(
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
  const failures = await runScenarios(
    "sealed",
    () => Promise.resolve(new MemoryStore()),
    { encryption: { keys: [{ id: "k1", key }] } },
  );
  assert.deepEqual(failures, []);
});

Deno.test({
  name: testName(
    "faults: FaultyStore over RedisStore, every operation and outcome, many keys times duplicates",
    REDIS_IGNORE,
  ),
  ignore: REDIS_IGNORE !== false,
  async fn() {
    const prefix = `${uniquePrefix("faults1")}:`;
    const client = await createClient({ url: REDIS_URL }).connect();
    try {
      const failures = await runScenarios(
        "redis",
        (i) =>
          Promise.resolve(
            new RedisStore({ client, prefix: `${prefix}${i}:` }),
          ),
      );
      await completeLost(
        "redis",
        new RedisStore({ client, prefix: `${prefix}lost:` }),
      );
      assert.deepEqual(failures, []);
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
});

Deno.test({
  name: testName(
    "faults: FaultyStore over PostgresStore, every operation and outcome, many keys times duplicates",
    POSTGRES_IGNORE,
  ),
  ignore: POSTGRES_IGNORE !== false,
  async fn() {
    const table = uniquePrefix("faults1");
    const sql = postgres(DATABASE_URL, { onnotice: () => {}, max: 8 });
    try {
      const store = new PostgresStore({ sql, table });
      await store.migrate();
      // One table, keys unique per scenario.
      const failures = await runScenarios("pg", () => Promise.resolve(store));
      await completeLost("pg", store);
      assert.deepEqual(failures, []);
    } finally {
      await sql.unsafe(`DROP TABLE IF EXISTS "${table}"`).catch(() => {});
      await sql.end();
    }
  },
});
