// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Header bytes a store refuses (docs/architecture.md, Store contract): a
 * handler's header whose value holds a control character (but tab) is left
 * out of its record and named in `idempotent-omitted-headers`. The client
 * gets the handler's own headers now; a retry gets the replay without that
 * header, its name told, never a 500 or a second run. On MemoryStore (which
 * refuses such a record outright), PostgreSQL and Redis.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency, type IdempotencyStore, MemoryStore } from "../mod.ts";
import type { IdempotencyEvent } from "../src/events.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { post } from "./_support/http.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./_support/services.ts";
import { deleteRedisKeys } from "./_support/redis.ts";

/** Values `Headers` takes: each control character it lets through, DEL, and a tab. */
const CONTROLS = [
  "\u0001",
  "\u0008",
  "\u000b",
  "\u000c",
  "\u000e",
  "\u001f",
  "\u007f",
];

/** Runs one key twice on `store`: the first answer, the retry, the runs, the events. */
async function twice(store: IdempotencyStore, key: string, control: string) {
  let runs = 0;
  const events: IdempotencyEvent[] = [];
  const handler = idempotency(() => {
    runs++;
    return new Response("paid", {
      status: 201,
      headers: [
        ["content-type", "text/plain"],
        ["x-trace", `a${control}b`],
        ["x-tab", "a\tb"],
        ["x-order", "ord_1"],
      ],
    });
  }, {
    scope: "global",
    store,
    onEvent: (e) => events.push(e),
    logger: false,
  });
  const first = await handler(post(key));
  const firstHeaders = [...first.headers];
  const firstBody = await first.text();
  const retry = await handler(post(key));
  return {
    first: { status: first.status, headers: firstHeaders, body: firstBody },
    retry: {
      status: retry.status,
      headers: [...retry.headers],
      body: await retry.text(),
    },
    runs,
    events,
  };
}

async function assertLeftOut(store: IdempotencyStore, label: string) {
  for (const [i, control] of CONTROLS.entries()) {
    const what = `${label}, U+${control.charCodeAt(0).toString(16)}`;
    const { first, retry, runs, events } = await twice(
      store,
      `${label}-${i}`,
      control,
    );
    // Now: the handler's own answer, the header as it gave it.
    assert.equal(first.status, 201, what);
    assert.equal(first.body, "paid", what);
    assert.deepEqual(
      first.headers.find(([n]) => n === "x-trace"),
      ["x-trace", `a${control}b`],
      what,
    );
    // The retry: the replay, that header left out and named, the tab kept.
    assert.equal(retry.status, 201, what);
    assert.equal(retry.body, "paid", what);
    const replayed = new Headers(retry.headers);
    assert.equal(replayed.get("idempotent-replayed"), "true", what);
    assert.equal(replayed.get("x-trace"), null, what);
    assert.equal(replayed.get("x-tab"), "a\tb", what);
    assert.equal(replayed.get("x-order"), "ord_1", what);
    assert.equal(replayed.get("idempotent-omitted-headers"), "x-trace", what);
    assert.equal(runs, 1, what);
    const completed = events.find((e) => e.type === "completed");
    assert.ok(
      completed?.type === "completed" && completed.outcome === "applied",
      what,
    );
    assert.equal(events.some((e) => e.type === "store_error"), false, what);
  }
}

Deno.test("idempotency() on MemoryStore: a header with a control character is the live answer's, left out of the replay and named", async () => {
  await assertLeftOut(new MemoryStore(), "memory");
});

integrationTest(
  "idempotency() on PostgresStore: a header with a control character is left out of the record and named in the replay",
  POSTGRES_IGNORE,
  async () => {
    await using db = await postgresSchema("strength_ctl");
    const store = new PostgresStore({
      sql: db.sql,
      table: `${db.schema}.idempotency_keys`,
    });
    await store.migrate();
    await assertLeftOut(store, "postgres");
  },
);

integrationTest(
  "idempotency() on RedisStore: a header with a control character is left out of the record and named in the replay",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("strength-ctl")}:`;
    const client = await createClient({ url: REDIS_URL }).connect();
    try {
      await assertLeftOut(new RedisStore({ client, prefix }), "redis");
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
);
