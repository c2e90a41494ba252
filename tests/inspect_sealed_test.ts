// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `inspectKey()` and `inspectStats()` given the app's `encryption` on sealed
 * records under a rotated key list, on every store (Redis, PostgreSQL, a KV
 * file, memory, a FailoverStore): with keys that lack the sealing key, the
 * record is `unreadable` naming its key id (as the middleware answers 500);
 * without keys, sealed and unverified; with the right key, completed and its
 * header names revealed; a record in clear under encryption, unreadable.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency, importEncryptionKeys } from "../mod.ts";
import { forgetKey, inspectKey, inspectStats } from "../src/inspect.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { KvStore } from "../src/stores/kv.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { SqliteStore } from "../src/stores/sqlite.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./_support/services.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import { post } from "./_support/http.ts";

import { BEFORE, DROPPED, plantSealed, ROTATED } from "./_support/sealed.ts";

async function check(store: IdempotencyStore): Promise<void> {
  await plantSealed(store);
  const at = (key: string) => ({ scope: "acct", key });

  // The app after a deploy that dropped k1: it answers 500, and so says inspect.
  const app = idempotency(() => new Response("ran"), {
    scope: () => "acct",
    store,
    encryption: DROPPED,
  });
  const res = await app(post("a"));
  await res.body?.cancel();
  assert.equal(res.status, 500);
  const gone = await inspectKey(store, { ...at("a"), encryption: DROPPED });
  assert.equal(gone.state, "unreadable");
  assert.equal(gone.sealed, true);
  assert.equal(gone.verified, false);
  assert.equal(gone.keyId, "k1");
  assert.equal(
    gone.reason,
    'sealed under key id "k1", not among the keys given',
  );
  assert.ok(
    gone.state === "unreadable" && gone.expiresAt! > Date.now() - 5_000,
  );

  // Without keys: completed, but sealed and unverified; names hidden.
  const unverified = await inspectKey(store, at("a"));
  assert.equal(unverified.state, "completed");
  assert.equal(unverified.sealed, true);
  assert.equal(unverified.verified, false);
  assert.equal(unverified.keyId, "k1");
  assert.ok(unverified.state === "completed");
  assert.deepEqual(unverified.headerNames, ["idempotent-sealed"]);
  assert.ok(!("response" in unverified), "the record itself is not handed out");

  // With the rotated list: completed, verified, the names and length revealed.
  const opened = await inspectKey(store, { ...at("a"), encryption: ROTATED });
  assert.ok(opened.state === "completed");
  assert.equal(opened.verified, true);
  assert.equal(opened.keyId, "k1");
  assert.deepEqual(opened.headerNames, ["content-type", "x-order"]);
  assert.equal(opened.bodyBytes, '{"id":"pay_1"}'.length);
  assert.equal(opened.status, 201);
  const d = await inspectKey(store, { ...at("d"), encryption: DROPPED });
  assert.ok(d.state === "completed" && d.verified && d.keyId === "k2");

  // A record in clear while encryption is on: the app would not open it.
  const clear = await inspectKey(store, {
    ...at("clear"),
    encryption: DROPPED,
  });
  assert.equal(clear.state, "unreadable");
  assert.equal(clear.sealed, undefined);
  assert.match(
    clear.reason!,
    /written in clear .* while the 'encryption' option is on/,
  );
  const plain = await inspectKey(store, at("clear"));
  assert.ok(plain.state === "completed" && plain.verified === undefined);
  const flight = await inspectKey(store, {
    ...at("flight"),
    encryption: DROPPED,
  });
  assert.equal(flight.state, "in_flight");

  // The counts: without keys, by state; with them, what the app would open.
  const stats = await inspectStats(store);
  assert.deepEqual(
    [stats.inFlight, stats.completed, stats.unreadable],
    [1, 5, 0],
  );
  assert.deepEqual(stats.sealed, { k1: 3, k2: 1 });
  const dropped = await inspectStats(store, { encryption: DROPPED });
  assert.deepEqual(
    [dropped.inFlight, dropped.completed, dropped.unreadable, dropped.unopened],
    [1, 1, 4, 4],
  );
  const rotated = await inspectStats(store, { encryption: ROTATED });
  assert.deepEqual([rotated.completed, rotated.unreadable], [4, 1]);

  // forgetKey takes the same location; the key runs again.
  assert.equal(
    (await forgetKey(store, { ...at("a"), encryption: DROPPED })).result,
    "deleted",
  );
  assert.equal(await (await app(post("a"))).text(), "ran");
}

Deno.test("inspectKey() and inspectStats() with 'encryption' on MemoryStore and FailoverStore", async () => {
  await check(new MemoryStore());
  const [primary, fallback] = [new MemoryStore(), new MemoryStore()];
  await check(new FailoverStore({ primary, fallback }));
  await assert.rejects(
    inspectKey(new MemoryStore(), {
      scope: "acct",
      key: "a",
      encryption: { keys: [] },
    }),
    /'encryption\.keys' must be a non-empty list/,
  );
  await assert.rejects(
    inspectStats(new MemoryStore(), { limit: 1, encyption: 1 } as never),
    /encyption/,
  );
});

Deno.test("inspectKey() with keys says it could not verify when a store's peek() returns no record", async () => {
  const inner = new MemoryStore();
  await plantSealed(inner);
  const bare: IdempotencyStore = {
    claim: (s, o) => inner.claim(s, o),
    complete: (s, t, r) => inner.complete(s, t, r),
    release: (s, t) => inner.release(s, t),
    extend: (s, t, l) => inner.extend(s, t, l),
    peek: (s) => inner.peek(s), // drops the options: a store of another package
    stats: async () => {
      const { sealed: _, ...rest } = await inner.stats();
      return rest;
    },
  };
  const found = await inspectKey(bare, {
    scope: "acct",
    key: "a",
    encryption: DROPPED,
  });
  assert.ok(found.state === "completed" && found.verified === false);
  assert.equal(found.reason, "the store's peek() gave no record to open");
  const stats = await inspectStats(bare, { encryption: DROPPED });
  assert.equal(stats.verified, false);
  assert.equal(stats.completed, 5);
});

integrationTest(
  "inspectKey() and inspectStats() with 'encryption' on RedisStore",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("inspect-sealed")}:`;
    const client = await createClient({ url: REDIS_URL }).connect();
    try {
      const store = new RedisStore({ client, prefix });
      await check(store);
      // Ids the header JSON escapes, and one named like a prototype, counted as they are.
      for (const id of ['q"\\x', "__proto__"]) {
        const encryption = await importEncryptionKeys(
          `${id}:${btoa("k".repeat(32))}`,
        );
        const odd = idempotency(() => new Response("ok"), {
          scope: "global",
          store,
          encryption,
        });
        await (await odd(post(`odd-${id}`))).text();
        const stats = await inspectStats(store, { encryption });
        assert.equal(
          Object.getOwnPropertyDescriptor(stats.sealed, id)?.value,
          1,
        );
        assert.equal(stats.completed, 1, id);
      }
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
);

integrationTest(
  "inspectKey() and inspectStats() with 'encryption' on PostgresStore",
  POSTGRES_IGNORE,
  async () => {
    await using db = await postgresSchema("inspsealed");
    const store = new PostgresStore({
      sql: db.sql,
      table: `${db.schema}.idempotency_keys`,
    });
    await store.migrate();
    await check(store);
  },
);

Deno.test("inspectKey() and inspectStats() with 'encryption' on SqliteStore, key ids the header JSON escapes too", async () => {
  const dir = await Deno.makeTempDir();
  const store = new SqliteStore({ database: `${dir}/db.sqlite` });
  try {
    await store.migrate();
    await check(store);
    for (const id of ['q"\\x', "__proto__"]) {
      const encryption = await importEncryptionKeys(
        `${id}:${btoa("k".repeat(32))}`,
      );
      const odd = idempotency(() => new Response("ok"), {
        scope: "global",
        store,
        encryption,
      });
      await (await odd(post(`odd-${id}`))).text();
      const stats = await inspectStats(store, { encryption });
      assert.equal(Object.getOwnPropertyDescriptor(stats.sealed, id)?.value, 1);
    }
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("inspectKey() and inspectStats() with 'encryption' on KvStore, a chunked record too", async () => {
  const path = await Deno.makeTempFile({ suffix: ".db" });
  const kv = await Deno.openKv(path);
  try {
    const store = new KvStore({ kv });
    await check(store);
    // A body past one KV value: its header list lives in chunks.
    const big = idempotency(() => new Response("x".repeat(200_000)), {
      scope: () => "acct",
      store,
      encryption: BEFORE,
    });
    await (await big(post("big"))).text();
    const found = await inspectKey(store, {
      scope: "acct",
      key: "big",
      encryption: ROTATED,
    });
    assert.ok(found.state === "completed" && found.verified);
    assert.equal(found.bodyBytes, 200_000);
    assert.equal((await inspectStats(store)).sealed!.k1, 3);
  } finally {
    kv.close();
    await Deno.remove(path);
  }
});
