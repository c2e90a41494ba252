// Copyright 2026 the @idempotent/http authors. MIT license.
/**
/**
 * Sealed records (the `encryption` option) on every store: what a raw dump
 * of the store shows (no 8-byte window of the body or of any header value),
 * byte-identical replays, and the records that must not open (moved to
 * another slot, one bit flipped, sealed under a key no longer listed,
 * written in clear, read without keys): 500 (the `unreadable` problem, no
 * `Retry-After`) with an `unreadable` conflict, the handler never run again;
 * and sealed records in the handler's transaction. The key checks, the
 * handler's own `Idempotent-Sealed` header, bodies dropped under pressure,
 * forged records and records that cannot be sealed are in
 * `idempotency_sealing_edges_test.ts`; what both share in
 * `_sealing_fixtures.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createClient, RESP_TYPES } from "redis";
import { idempotency, slotOf } from "../mod.ts";
import type { IdempotencyStore, StoredResponse } from "../src/store.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { KvStore } from "../src/stores/kv.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { MysqlStore } from "../src/stores/mysql.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { SqliteStore } from "../src/stores/sqlite.ts";
import { DynamoDbStore } from "../src/stores/dynamodb.ts";
import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { startDynalite } from "./_support/dynalite.ts";
import { DatabaseSync } from "node:sqlite";
import {
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "./_support/services.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import { MYSQL_IGNORE, mysqlPool } from "./_support/mariadb.ts";
import { dropStore } from "./stores/_mysql_fixtures.ts";
import { post } from "./_support/http.ts";
import { pattern } from "./_support/bytes.ts";

import {
  assertUnreadable,
  BODY,
  HEADERS,
  Held,
  instance,
  NEW,
  OLD,
  sealed,
  snapshot,
} from "./_sealing_fixtures.ts";

/** A store and every byte it holds, as a dump of its service would show it. */
interface Target {
  store: IdempotencyStore;
  raw(): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** Strings as UTF-8, bytes as they are, everything else walked. */
function flatten(value: unknown, out: number[] = []): number[] {
  if (value instanceof Uint8Array) out.push(...value);
  else if (typeof value === "string") {
    out.push(...new TextEncoder().encode(value));
  } else if (Array.isArray(value)) { for (const v of value) flatten(v, out); }
  else if (value !== null && typeof value === "object") {
    for (const v of Object.values(value)) flatten(v, out);
  } else out.push(...new TextEncoder().encode(String(value)));
  return out;
}

/** Whether `haystack` holds any of several 8-byte windows of `text`. */
function leaks(haystack: Uint8Array, text: string): string | null {
  const bytes = new TextEncoder().encode(text);
  const hay = Buffer.from(haystack);
  for (let at = 0; at + 8 <= bytes.byteLength; at += 5) {
    const window = bytes.subarray(at, at + 8);
    if (hay.indexOf(window) !== -1) return new TextDecoder().decode(window);
  }
  return null;
}

/** Copies the record of `from` to the slot of `to`, changed by `change`. */
async function plant(
  store: IdempotencyStore,
  from: string,
  to: string,
  change: (record: StoredResponse) => StoredResponse = (r) => r,
): Promise<void> {
  const options = { fingerprint: "any", leaseMs: 10_000, ttlMs: 600_000 };
  const found = await store.claim(slotOf("", from), options);
  assert.equal(found.state, "completed");
  if (found.state !== "completed") return;
  const fingerprint = found.fingerprint;
  const claim = await store.claim(slotOf("", to), { ...options, fingerprint });
  assert.equal(claim.state, "acquired");
  if (claim.state !== "acquired") return;
  const record = change(found.response);
  assert.equal(
    await store.complete(slotOf("", to), claim.token, record),
    "applied",
  );
}

function flipped(record: StoredResponse): StoredResponse {
  const body = new Uint8Array(record.body!);
  body[body.byteLength >> 1]! ^= 0x10;
  return { ...record, body };
}

function sealingOn(
  name: string,
  ignore: false | string,
  setup: () => Promise<Target>,
): void {
  Deno.test({
    name: testName(`sealed records on ${name}`, ignore),
    ignore: ignore !== false,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const target = await setup();
      const { store } = target;
      const events: string[] = [];
      const run = crypto.randomUUID().slice(0, 8);
      const key = (label: string) => `${run}-${label}`;
      try {
        const first = sealed([OLD], store, events);
        const live = await snapshot(await first.handler(post(key("a"))));
        const big = pattern(8192, 7); // over maxResponseBytes: body left out
        const overflow = idempotency(
          () => new Response(big, { status: 200, headers: HEADERS }),
          {
            scope: "global",
            store,
            maxResponseBytes: 4096,
            encryption: { keys: [OLD] },
          },
        );
        await (await overflow(post(key("big")))).arrayBuffer();

        await t.step(
          "the store holds no window of the body or a header value",
          async () => {
            const raw = await target.raw();
            for (const text of [BODY, ...HEADERS.map(([, v]) => v)]) {
              assert.equal(leaks(raw, text), null, text);
            }
            // The dump sees a record in clear: the check can fail.
            const plain = instance(store, []);
            await (await plain.handler(post(key("clear")))).arrayBuffer();
            assert.notEqual(leaks(await target.raw(), BODY), null);
          },
        );

        await t.step(
          "the replay is the live response, byte for byte",
          async () => {
            const replay = await first.handler(post(key("a")));
            assert.equal(replay.headers.get("idempotent-replayed"), "true");
            assert.deepEqual(await snapshot(replay), live);
            assert.deepEqual(live.headers, HEADERS);
            assert.equal(new TextDecoder().decode(live.body), BODY);
            const omitted = await overflow(post(key("big")));
            assert.equal(
              omitted.headers.get("idempotent-body-omitted"),
              "too_large",
            );
            assert.equal(omitted.headers.get("x-customer"), HEADERS[3]![1]);
            await omitted.body?.cancel();
            assert.equal(first.runs(), 1);
          },
        );

        await t.step(
          "a record moved to another slot or with one bit flipped answers 500 unreadable",
          async () => {
            await plant(store, key("a"), key("moved"));
            await assertUnreadable(first.handler, key("moved"), events);
            await plant(store, key("a"), key("flipped"), flipped);
            await assertUnreadable(first.handler, key("flipped"), events);
            assert.equal(first.runs(), 1);
          },
        );

        await t.step(
          "a key no longer listed answers 500 unreadable; listed second, it opens",
          async () => {
            const rotated = sealed([NEW], store, events);
            await assertUnreadable(rotated.handler, key("a"), events);
            const rotating = sealed([NEW, OLD], store, events);
            assert.deepEqual(
              await snapshot(await rotating.handler(post(key("a")))),
              live,
            );
            // What it seals now opens under the new key alone.
            await (await rotating.handler(post(key("b")))).arrayBuffer();
            const b = await rotated.handler(post(key("b")));
            assert.equal(b.headers.get("idempotent-replayed"), "true");
            assert.equal(await b.text(), BODY);
            assert.equal(rotated.runs() + rotating.runs(), 1);
          },
        );

        await t.step(
          "a record in clear under keys, or sealed without them, answers 500 unreadable",
          async () => {
            await assertUnreadable(first.handler, key("clear"), events);
            const plain = instance(store, events);
            await assertUnreadable(plain.handler, key("a"), events);
            assert.equal(plain.runs() + first.runs(), 1);
          },
        );
      } finally {
        await target.close();
      }
    },
  });
}

sealingOn("MemoryStore", false, () => {
  const store = new Held(new MemoryStore());
  return Promise.resolve({
    store,
    raw: () => Promise.resolve(new Uint8Array(flatten(store.held))),
    close: () => Promise.resolve(),
  });
});

async function kvTarget(): Promise<Target & { kv: Deno.Kv; kvStore: KvStore }> {
  const kv = await Deno.openKv(":memory:");
  const kvStore = new KvStore({ kv });
  return {
    kv,
    kvStore,
    store: kvStore,
    async raw() {
      const all: unknown[] = [];
      for await (const entry of kv.list({ prefix: [] })) {
        all.push(entry.key, entry.value);
      }
      return new Uint8Array(flatten(all));
    },
    close: () => Promise.resolve(kv.close()),
  };
}

sealingOn("KvStore", false, kvTarget);

async function redisTarget(): Promise<Target & { store: RedisStore }> {
  const client = await createClient({ url: REDIS_URL }).connect();
  const prefix = `${uniquePrefix("sealed")}:`;
  const bytes = client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  return {
    store: new RedisStore({ client, prefix }),
    async raw() {
      const values: unknown[] = [];
      for await (const keys of client.scanIterator({ MATCH: `${prefix}*` })) {
        for (const key of keys) values.push(await bytes.get(key));
      }
      return new Uint8Array(flatten(values));
    },
    async close() {
      await deleteRedisKeys(prefix);
      client.destroy();
    },
  };
}

sealingOn("RedisStore", REDIS_IGNORE, redisTarget);

async function postgresTarget(): Promise<Target & { store: PostgresStore }> {
  const pg = await postgresSchema("sealed");
  const table = `"${pg.schema}".keys`;
  const store = new PostgresStore({ sql: pg.sql, table: `${pg.schema}.keys` });
  await store.migrate();
  return {
    store,
    async raw() {
      // Every column, jsonb as its text, bytea as its bytes.
      const rows = await pg.sql.unsafe(
        `SELECT slot, version, state, fingerprint, token, status,
                headers::text AS headers, body, omitted FROM ${table}`,
      );
      return new Uint8Array(flatten(rows.map((row) => ({ ...row }))));
    },
    close: () => pg.drop(),
  };
}

sealingOn("PostgresStore", POSTGRES_IGNORE, postgresTarget);

async function mysqlTarget(): Promise<Target & { store: MysqlStore }> {
  const pool = mysqlPool();
  const table = uniquePrefix("sealed");
  const store = new MysqlStore({ pool, table });
  await store.migrate();
  return {
    store,
    async raw() {
      // Every column, the text ones as their text, the binary ones as bytes.
      const [rows] = await pool.query(
        `SELECT slot, version, state, fingerprint, token, status, headers, body,
                omitted FROM \`${table}\``,
      );
      return new Uint8Array(flatten(rows));
    },
    async close() {
      await dropStore(pool, table);
      await pool.end();
    },
  };
}

async function sqliteTarget(): Promise<Target & { store: SqliteStore }> {
  const dir = await Deno.makeTempDir({ prefix: "idem-sealed-" });
  const store = new SqliteStore({ database: `${dir}/db.sqlite` });
  await store.migrate();
  const db = new DatabaseSync(`${dir}/db.sqlite`);
  return {
    store,
    raw: () =>
      Promise.resolve(
        new Uint8Array(flatten(
          db.prepare(`SELECT * FROM ${store.table}`).all().map((r) => ({
            ...r,
          })),
        )),
      ),
    async close() {
      db.close();
      store.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

sealingOn("MysqlStore", MYSQL_IGNORE, mysqlTarget);

sealingOn("SqliteStore", false, sqliteTarget);

sealingOn("DynamoDbStore (dynalite)", false, async () => {
  const dynalite = await startDynalite();
  const client = dynalite.client();
  const store = new DynamoDbStore({ client, table: "sealed_records" });
  await store.migrate();
  return {
    store,
    async raw() {
      // Every attribute of every item: strings as UTF-8, binaries as bytes.
      const scan = new ScanCommand({ TableName: "sealed_records" });
      return new Uint8Array(flatten((await client.send(scan)).Items));
    },
    close: () => dynalite.stop(),
  };
});

sealingOn(
  "FailoverStore (Redis, then PostgreSQL)",
  REDIS_IGNORE || POSTGRES_IGNORE,
  async () => {
    const primary = await redisTarget();
    const fallback = await postgresTarget();
    return {
      store: new FailoverStore({
        primary: primary.store,
        fallback: fallback.store,
      }),
      async raw() {
        const [p, f] = [await primary.raw(), await fallback.raw()];
        return new Uint8Array([...p, ...f]);
      },
      async close() {
        await primary.close();
        await fallback.close();
      },
    };
  },
);

Deno.test("sealed records in the handler's transaction: KvStore.atomic(), PostgresStore, MysqlStore and SqliteStore.transactional()", async (t) => {
  await t.step("SqliteStore.transactional()", async () => {
    const target = await sqliteTarget();
    try {
      const { store } = target;
      let runs = 0;
      const handler = idempotency(
        store.transactional((_request, db) => {
          runs++;
          db.exec("CREATE TABLE IF NOT EXISTS orders (item TEXT)");
          return new Response(BODY, { status: 201, headers: HEADERS });
        }),
        { scope: "global", store, encryption: { keys: [OLD] } },
      );
      const live = await snapshot(await handler(post("t1")));
      for (const text of [BODY, ...HEADERS.map(([, v]) => v)]) {
        assert.equal(leaks(await target.raw(), text), null, text);
      }
      assert.deepEqual(await snapshot(await handler(post("t1"))), live);
      assert.equal(runs, 1);
    } finally {
      await target.close();
    }
  });
  await t.step("KvStore.atomic()", async () => {
    const target = await kvTarget();
    try {
      const { kvStore, kv } = target;
      let runs = 0;
      const handler = idempotency((request) => {
        runs++;
        kvStore.atomic(request).set(["orders", "o1"], "book");
        return new Response(BODY, { status: 201, headers: HEADERS });
      }, { scope: "global", store: kvStore, encryption: { keys: [OLD] } });
      const live = await snapshot(await handler(post("t1")));
      assert.equal((await kv.get(["orders", "o1"])).value, "book");
      for (const [, value] of HEADERS) {
        assert.equal(leaks(await target.raw(), value), null);
      }
      assert.equal(leaks(await target.raw(), BODY), null);
      assert.deepEqual(await snapshot(await handler(post("t1"))), live);
      assert.equal(runs, 1);
    } finally {
      await target.close();
    }
  });
  /** A transactional SQL handler's sealed record: no clear text, one run. */
  const sealedTransaction = async (
    target: Target,
    wrap: (run: () => void) => (request: Request) => Promise<Response>,
  ) => {
    try {
      let runs = 0;
      const handler = idempotency(wrap(() => runs++), {
        scope: "global",
        store: target.store,
        encryption: { keys: [OLD] },
      });
      const live = await snapshot(await handler(post("t1")));
      for (const text of [BODY, ...HEADERS.map(([, v]) => v)]) {
        assert.equal(leaks(await target.raw(), text), null, text);
      }
      assert.deepEqual(await snapshot(await handler(post("t1"))), live);
      assert.equal(runs, 1);
    } finally {
      await target.close();
    }
  };
  await t.step({
    name: testName("PostgresStore.transactional()", POSTGRES_IGNORE),
    ignore: POSTGRES_IGNORE !== false,
    fn: async () => {
      const target = await postgresTarget();
      await sealedTransaction(
        target,
        (run) =>
          target.store.transactional(async (_request, tx) => {
            run();
            await tx.unsafe("SELECT 1");
            return new Response(BODY, { status: 201, headers: HEADERS });
          }),
      );
    },
    sanitizeOps: false,
    sanitizeResources: false,
  });
  await t.step({
    name: testName("MysqlStore.transactional()", MYSQL_IGNORE),
    ignore: MYSQL_IGNORE !== false,
    fn: async () => {
      const target = await mysqlTarget();
      await sealedTransaction(
        target,
        (run) =>
          target.store.transactional(async (_request, tx) => {
            run();
            await tx.query("SELECT 1");
            return new Response(BODY, { status: 201, headers: HEADERS });
          }),
      );
    },
    sanitizeOps: false,
    sanitizeResources: false,
  });
});
