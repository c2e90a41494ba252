// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * No credential headers at rest by default: on every store, the raw stored
 * value of a response that set cookies holds no cookie value, and its replay
 * says `Idempotent-Omitted-Headers: set-cookie`; `storeSetCookie: true`
 * stores and replays them. Also the fields `Cache-Control` names private.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createClient } from "redis";
import {
  HEADERS_OMITTED_HEADER,
  idempotency,
  type IdempotencyOptions,
  MemoryStore,
  slotOf,
} from "../mod.ts";
import type { IdempotencyStore, StoredResponse } from "../src/store.ts";
import { KvStore } from "../src/stores/kv.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import { post } from "./_support/http.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresStore,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./_support/services.ts";

const SESSION = "s3ss10n-9f2c41d07ab8";
const CSRF = "csrf-77e1b05a93cd";
const COOKIES = [`session=${SESSION}; Path=/; HttpOnly`, `csrf=${CSRF}`];
const MARKER = HEADERS_OMITTED_HEADER.toLowerCase();

/** A store under test and a dump of what it holds for a key, as text. */
interface Target {
  store: IdempotencyStore;
  dump(key: string): Promise<string>;
  close(): Promise<void>;
}

/** Every string and byte string in `value`, bytes as Latin-1, one a line. */
function text(value: unknown): string {
  if (value instanceof Uint8Array) {
    return new TextDecoder("latin1").decode(value);
  }
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object") {
    return Object.values(value).map(text).join("\n");
  }
  return String(value);
}

const memory = (): Target => {
  const store = new MemoryStore();
  return {
    store,
    // What a claim reads back is what the store holds.
    async dump(key) {
      const claim = await store.claim(slotOf("", key), {
        fingerprint: "f",
        leaseMs: 1_000,
        ttlMs: 1_000,
      });
      assert.equal(claim.state, "completed");
      return text((claim as { response: StoredResponse }).response);
    },
    close: () => Promise.resolve(),
  };
};

const kv = async (): Promise<Target> => {
  const kv = await Deno.openKv(":memory:");
  return {
    store: new KvStore({ kv }),
    async dump(key) {
      const slot = slotOf("", key);
      const entries = (await Array.fromAsync(kv.list({ prefix: [] })))
        .filter((entry) => entry.key.includes(slot));
      assert.ok(entries.length > 0);
      return text(entries.map((entry) => [entry.key, entry.value]));
    },
    close: () => Promise.resolve(kv.close()),
  };
};

const redis = async (): Promise<Target> => {
  const client = await createClient({ url: REDIS_URL }).connect();
  const prefix = `${uniquePrefix("credentials")}:`;
  return {
    store: new RedisStore({ client, prefix }),
    async dump(key) {
      const value = await client.get(prefix + slotOf("", key));
      assert.ok(value !== null);
      return value;
    },
    async close() {
      await deleteRedisKeys(prefix);
      await client.quit();
    },
  };
};

const postgres = async (): Promise<Target> => {
  const { store, sql, schema, drop } = await postgresStore("credentials");
  return {
    store,
    async dump(key) {
      const rows = await sql.unsafe(
        `SELECT * FROM "${schema}".keys WHERE slot = $1`,
        [slotOf("", key)],
      );
      assert.equal(rows.length, 1);
      return text([...rows]);
    },
    close: drop,
  };
};

const TARGETS: [string, false | string, () => Target | Promise<Target>][] = [
  ["MemoryStore", false, memory],
  ["KvStore", false, kv],
  ["RedisStore", REDIS_IGNORE, redis],
  ["PostgresStore", POSTGRES_IGNORE, postgres],
];

/** A payment that sets two cookies, and how often it ran. */
function app(store: IdempotencyStore, options: Partial<IdempotencyOptions>) {
  const state = { runs: 0 };
  const guarded = idempotency(() => {
    state.runs++;
    const headers = new Headers({ "content-type": "text/plain" });
    for (const cookie of COOKIES) headers.append("set-cookie", cookie);
    return new Response("paid", { status: 201, headers });
  }, { scope: "global", store, ...options });
  return { state, guarded };
}

for (const [name, ignore, setup] of TARGETS) {
  integrationTest(
    `on ${name} a record holds no cookie value by default and its replay says set-cookie was left out; storeSetCookie: true stores and replays them`,
    ignore,
    async () => {
      const target = await setup();
      try {
        const { state, guarded } = app(target.store, {});
        const live = await guarded(post("k"));
        assert.deepEqual(live.headers.getSetCookie(), COOKIES);
        assert.equal(live.headers.get(MARKER), null);
        assert.equal(await live.text(), "paid");
        const dump = await target.dump("k");
        assert.ok(dump.includes("paid"), dump);
        assert.ok(!dump.includes(SESSION), dump);
        assert.ok(!dump.includes(CSRF), dump);
        const replay = await guarded(post("k"));
        assert.equal(replay.headers.get("idempotent-replayed"), "true");
        assert.deepEqual(replay.headers.getSetCookie(), []);
        assert.equal(replay.headers.get(MARKER), "set-cookie");
        assert.equal(replay.headers.get("content-type"), "text/plain");
        assert.equal(await replay.text(), "paid");
        assert.equal(state.runs, 1);

        const optIn = app(target.store, { storeSetCookie: true });
        await (await optIn.guarded(post("opt-in"))).text();
        const stored = await target.dump("opt-in");
        assert.ok(stored.includes(SESSION) && stored.includes(CSRF), stored);
        const again = await optIn.guarded(post("opt-in"));
        assert.equal(again.headers.get("idempotent-replayed"), "true");
        assert.deepEqual(again.headers.getSetCookie(), COOKIES);
        assert.equal(again.headers.get(MARKER), null);
        assert.equal(await again.text(), "paid");
        assert.equal(optIn.state.runs, 1);
      } finally {
        await target.close();
      }
    },
  );
}

/** The header names of `headers`, in order. */
function names(headers: Iterable<[string, string]>): string[] {
  return [...headers].map(([name]) => name);
}

Deno.test('Cache-Control private="…" and no-cache="…" fields are neither stored nor replayed, and are named', async () => {
  const target = memory();
  let runs = 0;
  const guarded = idempotency(() => {
    runs++;
    return new Response("ok", {
      status: 201,
      headers: [
        ["cache-control", 'no-store, private="X-A, x-b"'],
        ["cache-control", "no-cache=x-c"],
        ["x-c", "3"],
        ["x-b", "2"],
        ["x-a", "1"],
        ["x-d", "4"],
        ["set-cookie", "a=1"],
      ],
    });
  }, { scope: "global", store: target.store });
  const live = await guarded(post("k"));
  assert.deepEqual(names(live.headers), [
    "cache-control",
    "content-type",
    "set-cookie",
    "x-a",
    "x-b",
    "x-c",
    "x-d",
  ]);
  assert.equal(await live.text(), "ok");
  const replay = await guarded(post("k"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(
    replay.headers.get("cache-control"),
    'no-store, private="X-A, x-b", no-cache=x-c',
  );
  assert.equal(replay.headers.get("x-d"), "4");
  for (const gone of ["x-a", "x-b", "x-c", "set-cookie"]) {
    assert.equal(replay.headers.get(gone), null, gone);
  }
  assert.equal(replay.headers.get(MARKER), "set-cookie, x-a, x-b, x-c");
  assert.equal(await replay.text(), "ok");
  assert.equal(runs, 1);
  assert.ok(!(await target.dump("k")).includes("x-a\n1"));
});

Deno.test("a record written with cookies replays under the default without them, naming them; a handler's own marker is not stored", async () => {
  const store = new MemoryStore();
  const optIn = app(store, { storeSetCookie: true });
  await (await optIn.guarded(post("k"))).text();
  const replay = await app(store, {}).guarded(post("k"));
  assert.deepEqual(replay.headers.getSetCookie(), []);
  assert.equal(replay.headers.get(MARKER), "set-cookie");
  await replay.body?.cancel();

  const forged = idempotency(
    () =>
      new Response("x", {
        status: 201,
        headers: { [HEADERS_OMITTED_HEADER]: "nothing" },
      }),
    { scope: "global", store },
  );
  const live = await forged(post("f"));
  assert.equal(live.headers.get(MARKER), "nothing");
  await live.body?.cancel();
  const again = await forged(post("f"));
  assert.equal(again.headers.get(MARKER), null);
  await again.body?.cancel();
});
