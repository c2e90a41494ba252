// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Sealed records (the `encryption` option) on every store: what a raw dump
 * of the store shows (no 8-byte window of the body or of any header value),
 * byte-identical replays, and the records that must not open (moved to
 * another slot, one bit flipped, sealed under a key no longer listed,
 * written in clear, read without keys): 500 (the `unreadable` problem, no
 * `Retry-After`) with an `unreadable` conflict, the handler never run again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createClient, RESP_TYPES } from "redis";
import { idempotency, slotOf } from "../mod.ts";
import type { IdempotencyEvent } from "../src/events.ts";
import type { IdempotencyOptions } from "../src/options.ts";
import type {
  IdempotencyStore,
  StoredResponse,
  UnitOfWork,
} from "../src/store.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { KvStore } from "../src/stores/kv.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { SqliteStore } from "../src/stores/sqlite.ts";
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
import { post } from "./_support/http.ts";
import { pattern } from "./_support/bytes.ts";
import { recorder, StoreWrapper } from "./_support/stores.ts";

type Keys = NonNullable<IdempotencyOptions["encryption"]>["keys"];

function aesKey(length = 256, usages: KeyUsage[] = ["encrypt", "decrypt"]) {
  return crypto.subtle.generateKey(
    { name: "AES-GCM", length },
    false,
    usages,
  ) as Promise<CryptoKey>;
}

const OLD = { id: "2026-01", key: await aesKey() };
const NEW = { id: "2026-02", key: await aesKey() };

/** The handler's answer: a body and header values worth hiding. */
const BODY = JSON.stringify({
  name: "Ada Lovelace",
  card: "fingerprint-9f8e7d6c5b4a3210",
  address: "12 Analytical Engine Row, London",
});
const HEADERS: [string, string][] = [
  ["content-type", "application/json; charset=utf-8"],
  ["etag", '"order-v1-5b4a3210fedcba98"'],
  ["location", "/orders/ord_7f3e2d1c0b9a8877"],
  ["x-customer", "cus_Lovelace_1815_12_10"],
];

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

/** Records what MemoryStore is given to hold: there is no service to dump. */
class Held extends StoreWrapper {
  held: StoredResponse[] = [];
  protected around<T>(_: string, __: string, run: () => Promise<T>) {
    return run();
  }
  override complete(slot: string, token: string, response: StoredResponse) {
    this.held.push(response);
    return super.complete(slot, token, response);
  }
}

function sealed(keys: Keys, store: IdempotencyStore, events: string[] = []) {
  return instance(store, events, { encryption: { keys } });
}

function instance(
  store: IdempotencyStore,
  events: string[],
  extra: Partial<IdempotencyOptions> = {},
) {
  let runs = 0;
  const handler = idempotency(() => {
    runs++;
    return new Response(BODY, { status: 201, headers: HEADERS });
  }, {
    scope: "global",
    store,
    maxResponseBytes: 4096,
    onEvent: (event: IdempotencyEvent) => {
      if (event.type === "conflict") {
        events.push(`conflict:${event.unreadable}`);
      }
    },
    ...extra,
  });
  return { handler, runs: () => runs };
}

async function snapshot(response: Response) {
  return {
    status: response.status,
    headers: [...response.headers].filter(([n]) => n !== "idempotent-replayed"),
    body: new Uint8Array(await response.arrayBuffer()),
  };
}

async function assertUnreadable(
  handler: (r: Request) => Response | Promise<Response>,
  key: string,
  events: string[],
): Promise<void> {
  events.length = 0;
  const answer = await handler(post(key));
  assert.equal(answer.status, 500, key);
  assert.equal(answer.headers.get("retry-after"), null, key);
  await answer.body?.cancel();
  assert.deepEqual(events, ["conflict:true"], key);
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

sealingOn("SqliteStore", false, sqliteTarget);

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

Deno.test("sealed records in the handler's transaction: KvStore.atomic(), PostgresStore.transactional() and SqliteStore.transactional()", async (t) => {
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
  await t.step({
    name: testName("PostgresStore.transactional()", POSTGRES_IGNORE),
    ignore: POSTGRES_IGNORE !== false,
    fn: async () => {
      const target = await postgresTarget();
      try {
        const { store } = target;
        let runs = 0;
        const handler = idempotency(
          store.transactional(async (_request, tx) => {
            runs++;
            await tx.unsafe("SELECT 1");
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
    },
    sanitizeOps: false,
    sanitizeResources: false,
  });
});

Deno.test("encryption: keys are checked at idempotency(), naming what is wrong", async () => {
  const make = (encryption: unknown) => () =>
    idempotency(() => new Response(), {
      scope: "global",
      encryption: encryption as NonNullable<IdempotencyOptions["encryption"]>,
    });
  assert.throws(make({ keys: [] }), TypeError, "'encryption.keys'");
  assert.throws(make(null), TypeError, "'encryption.keys'");
  assert.throws(
    make({ keys: [{ id: "", key: OLD.key }] }),
    TypeError,
    "'encryption.keys[0].id'",
  );
  assert.throws(
    make({ keys: [{ id: "a;b", key: OLD.key }] }),
    TypeError,
    "visible ASCII",
  );
  assert.throws(
    make({ keys: [{ id: "x".repeat(33), key: OLD.key }] }),
    TypeError,
  );
  assert.throws(
    make({ keys: [OLD, { ...NEW, id: OLD.id }] }),
    TypeError,
    "repeats",
  );
  // A raw key passed by mistake is named by its type, never printed.
  const raw = "raw-key-material-0123456789abcdef";
  for (
    const [key, type] of [[raw, "String"], [new Uint8Array(32), "Uint8Array"]]
  ) {
    assert.throws(
      make({ keys: [{ id: "k", key }] }),
      (error: Error) =>
        error instanceof TypeError &&
        error.message.includes("must be a CryptoKey (importEncryptionKeys(") &&
        error.message.endsWith(`: current type is ${type}`) &&
        !error.message.includes(raw) && !error.message.includes("0,0"),
    );
  }
  assert.throws(
    make({ keys: [{ id: "k", key: await aesKey(128) }] }),
    RangeError,
    "256 bits",
  );
  assert.throws(
    make({ keys: [OLD, { id: "k", key: await aesKey(256, ["encrypt"]) }] }),
    TypeError,
    "'encryption.keys[1].key' must allow",
  );
  const hmac = await crypto.subtle.generateKey(
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  assert.throws(make({ keys: [{ id: "k", key: hmac }] }), TypeError, "AES-GCM");
  make({ keys: [OLD, NEW] })();
});

Deno.test("idempotency() never stores a handler's own Idempotent-Sealed header: its record replays in clear", async () => {
  let runs = 0;
  const handler = idempotency(() => {
    runs++;
    return new Response("paid", {
      status: 201,
      headers: { "idempotent-sealed": "1;k1", "x-a": "1" },
    });
  }, { store: new MemoryStore(), scope: "global" });
  const first = await handler(post("sealed-name", "{}"));
  assert.equal(first.headers.get("idempotent-sealed"), "1;k1");
  await first.body?.cancel();
  const replay = await handler(post("sealed-name", "{}"));
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.headers.get("idempotent-sealed"), null);
  assert.equal(
    replay.headers.get("idempotent-omitted-headers"),
    "idempotent-sealed",
  );
  assert.equal(await replay.text(), "paid");
  assert.equal(runs, 1);
});

Deno.test("a sealed record whose body MemoryStore drops under byte pressure replays its status and headers, as one in clear does", async () => {
  const replays = [];
  for (const extra of [{}, { encryption: { keys: [OLD] } }]) {
    const store = new MemoryStore({ maxBytes: 3000 });
    let runs = 0;
    const guarded = (ttl: number) =>
      idempotency(() => {
        runs++;
        return new Response(pattern(1500, 3), {
          status: 201,
          headers: HEADERS,
        });
      }, { scope: "global", store, ttl, ...extra });
    // The second record's body pushes out the first's, nearer its expiry.
    await (await guarded(60_000)(post("pressed"))).arrayBuffer();
    await (await guarded(120_000)(post("pushing"))).arrayBuffer();
    const replay = await guarded(60_000)(post("pressed"));
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    // The store's own reason: not the middleware's, which the seal binds.
    assert.equal(
      replay.headers.get("idempotent-body-omitted"),
      "store_dropped",
    );
    replays.push(await snapshot(replay));
    assert.equal(runs, 2);
  }
  assert.equal(replays[1]!.status, 201);
  assert.deepEqual(replays[1], replays[0]);
});

/** A fresh store holding `response` at the slot of `key` under `fingerprint`, as someone without the key could write it. */
async function forged(
  key: string,
  fingerprint: string,
  response: StoredResponse,
): Promise<MemoryStore> {
  const store = new MemoryStore();
  const options = { fingerprint, leaseMs: 10_000, ttlMs: 600_000 };
  const claim = await store.claim(slotOf("", key), options);
  assert(claim.state === "acquired");
  await store.complete(slotOf("", key), claim.token, response);
  return store;
}

Deno.test("a sealed record whose stored fingerprint is changed, or whose body is another record's of its slot, answers 500 unreadable, not a replay", async () => {
  const completed = async (store: IdempotencyStore, key: string) => {
    const options = { fingerprint: "any", leaseMs: 10_000, ttlMs: 600_000 };
    const found = await store.claim(slotOf("", key), options);
    assert(found.state === "completed");
    return found;
  };
  const store = new MemoryStore();
  const { handler } = sealed([OLD], store);
  await (await handler(post("paid", '{"amount":100}'))).arrayBuffer();
  await (await handler(post("other"))).arrayBuffer(); // body "{}"
  const paid = await completed(store, "paid");
  const other = await completed(store, "other");
  // Another run of the same request, its answer another body.
  const elsewhere = new MemoryStore();
  const v2 = idempotency(
    () => new Response("v2", { status: 201, headers: HEADERS }),
    {
      scope: "global",
      store: elsewhere,
      encryption: { keys: [OLD] },
    },
  );
  await (await v2(post("paid", '{"amount":100}'))).arrayBuffer();
  const spliced = {
    ...paid.response,
    body: (await completed(elsewhere, "paid")).response.body,
  };
  const events: string[] = [];
  // A body "{}" now has the stored fingerprint: it must not replay.
  const moved = sealed(
    [OLD],
    await forged("paid", other.fingerprint, paid.response),
    events,
  );
  await assertUnreadable(moved.handler, "paid", events);
  const mixed = sealed(
    [OLD],
    await forged("paid", paid.fingerprint, spliced),
    events,
  );
  events.length = 0;
  const answer = await mixed.handler(post("paid", '{"amount":100}'));
  assert.equal(answer.status, 500);
  await answer.body?.cancel();
  assert.deepEqual(events, ["conflict:true"]);
  assert.equal(moved.runs() + mixed.runs(), 0);
});

/** A key that passes every check but that `encrypt` refuses: sealing throws. */
const BROKEN: CryptoKey = Object.create(CryptoKey.prototype, {
  type: { value: "secret" },
  algorithm: { value: { name: "AES-GCM", length: 256 } },
  usages: { value: ["encrypt", "decrypt"] },
});

/** A MemoryStore whose every claim opens a transaction, its calls recorded. */
class Transactional extends Held {
  calls: string[] = [];
  unitOfWork(): UnitOfWork {
    const { calls } = this;
    return {
      opened: true,
      commit: () => (calls.push("commit"), Promise.resolve("committed")),
      rollback: () => (calls.push("rollback"), Promise.resolve()),
    };
  }
}

Deno.test("a record that cannot be sealed is not written, never resealed: in a transaction, rolled back (503, the slot released); else the response goes out, the slot left in flight", async (t) => {
  for (const transactional of [false, true]) {
    await t.step(
      transactional ? "in a transaction" : "with complete",
      async () => {
        const store = transactional
          ? new Transactional(new MemoryStore())
          : new Held(new MemoryStore());
        const { onEvent, types } = recorder();
        let runs = 0;
        const handler = idempotency(() => {
          runs++;
          return new Response(BODY, { status: 201, headers: HEADERS });
        }, {
          scope: "global",
          store,
          onEvent,
          encryption: { keys: [{ id: "k", key: BROKEN }] },
        });
        const first = await handler(post("broken"));
        assert.equal(first.status, transactional ? 503 : 201);
        await first.body?.cancel();
        const settled = transactional ? "released" : "completed";
        assert.deepEqual(types(), ["claimed", "store_error", settled]);
        assert.deepEqual(store.held, []);
        const retry = await handler(post("broken"));
        await retry.body?.cancel();
        if (store instanceof Transactional) {
          assert.deepEqual(store.calls, ["rollback", "rollback"]);
          assert.equal(runs, 2);
        } else {
          assert.equal(retry.status, 409);
          assert.equal(runs, 1);
        }
      },
    );
  }
});
