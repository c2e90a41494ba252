// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's options: the required `scope`, their eager checks,
 * `cacheable`, `fingerprint`, `header`, `replayHeader` and the `onEvent`
 * hook; and the stores keeping records by the slot alone.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency, type IdempotencyOptions } from "../mod.ts";
import { idempotent } from "../src/hono.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { slotOf } from "../src/fingerprint.ts";
import { post } from "./_support/http.ts";
import { recorder } from "./_support/stores.ts";
import { counting } from "./_support/idempotency.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresStore,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./_support/services.ts";

/** The message of a missing or unknown `scope`, with what to pass. */
const SCOPE_REQUIRED =
  /^'scope' is required: pass \(request\) => the stable id of the user, tenant or API client the request acts for \(resolved after authentication\), or "global" for one key space shared by every caller/;

Deno.test("idempotency() without a scope throws a TypeError that says what to pass", () => {
  const ok = () => new Response();
  const missing = [
    // @ts-expect-error: the options, and scope in them, are required
    () => idempotency(ok),
    // @ts-expect-error: scope is required
    () => idempotency(ok, {}),
    () => idempotency(ok, { scope: undefined as never }),
    // @ts-expect-error: scope is required
    () => idempotency(ok, { store: new MemoryStore() }),
  ];
  for (const make of missing) {
    assert.throws(make, (e: unknown) => {
      assert.ok(e instanceof TypeError);
      assert.match(e.message, SCOPE_REQUIRED);
      return true;
    });
  }
});

Deno.test('idempotency() takes no string for scope but "global"', () => {
  const ok = () => new Response();
  for (const scope of ["", "Global", "tenant-a", " global"]) {
    assert.throws(
      () => idempotency(ok, { scope: scope as "global" }),
      (e: unknown) => {
        assert.ok(e instanceof TypeError);
        assert.match(e.message, SCOPE_REQUIRED);
        assert.ok(
          e.message.endsWith(`current value is ${JSON.stringify(scope)}`),
        );
        return true;
      },
      scope,
    );
  }
  assert.throws(
    () => idempotency(ok, { scope: 42 as never }),
    (e: unknown) => e instanceof TypeError && SCOPE_REQUIRED.test(e.message),
  );
});

Deno.test('idempotency() with scope "global" keeps the slots of the empty scope, never the text "global"', async () => {
  const store = new MemoryStore();
  const log = recorder();
  const { state, handler } = counting(() =>
    new Response("ok", { status: 201 })
  );
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    onEvent: log.onEvent,
  });
  await (await guarded(post("g-1"))).text();
  const claimed = log.events.find((e) => e.type === "claimed");
  assert.equal(claimed?.slot, slotOf("", "g-1"));
  assert.notEqual(claimed?.slot, slotOf("global", "g-1"));
  // A record written under the old default scope replays under "global".
  const replay = await guarded(post("g-1"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(state.runs, 1);
  const record = await store.claim(slotOf("", "g-1"), {
    fingerprint: "x",
    leaseMs: 1_000,
    ttlMs: 60_000,
  });
  assert.equal(record.state, "completed");
});

Deno.test('a scope function returning "" is refused as a throwing one is: the handler never runs, nothing is stored', async () => {
  const store = new MemoryStore();
  const { state, handler } = counting(() => new Response("ok"));
  const scopes = [
    () => "",
    () => Promise.resolve(""),
    () => {
      throw new Error("unauthenticated");
    },
  ];
  for (const [i, scope] of scopes.entries()) {
    const guarded = idempotency(handler, { scope, store });
    await assert.rejects(
      () => Promise.resolve(guarded(post(`e-${i}`))),
      i < 2
        ? (e: Error) =>
          e instanceof TypeError &&
          e.message.startsWith(`'scope' must not return ""`) &&
          e.message.includes("stable id") && e.message.includes('"global"')
        : /unauthenticated/,
    );
    const claim = { fingerprint: "x", leaseMs: 1_000, ttlMs: 60_000 };
    assert.equal(
      (await store.claim(slotOf("", `e-${i}`), claim)).state,
      "acquired",
    );
  }
  assert.equal(state.runs, 0);
});

Deno.test('idempotent() (Hono) requires a scope as the core does, and takes "global"', async () => {
  assert.throws(
    // @ts-expect-error: the options, and scope in them, are required
    () => idempotent(),
    (e: unknown) => e instanceof TypeError && SCOPE_REQUIRED.test(e.message),
  );
  assert.throws(
    // @ts-expect-error: scope is required
    () => idempotent({ store: new MemoryStore() }),
    (e: unknown) => e instanceof TypeError && SCOPE_REQUIRED.test(e.message),
  );
  assert.throws(() => idempotent({ scope: "tenant" as "global" }), TypeError);
  const log = recorder();
  const middleware = idempotent({ scope: "global", onEvent: log.onEvent });
  const c = {
    req: { raw: post("h-1") },
    res: undefined as Response | undefined,
    finalized: false,
  };
  await middleware(c, () => {
    c.res = new Response("ok", { status: 201 });
    c.finalized = true;
    return Promise.resolve();
  });
  assert.equal(c.res?.status, 201);
  const claimed = log.events.find((e) => e.type === "claimed");
  assert.equal(claimed?.slot, slotOf("", "h-1"));
});

Deno.test("idempotency() records what cacheable accepts and names the replay header as asked", async () => {
  const { state, handler } = counting(() =>
    Response.json({ error: "card declined" }, { status: 402 })
  );
  const guarded = idempotency(handler, {
    scope: "global",
    cacheable: (res) => res.status < 500,
    replayHeader: "X-Replayed",
  });
  await (await guarded(post("declined"))).text();
  const replay = await guarded(post("declined"));
  assert.equal(replay.status, 402);
  assert.equal(replay.headers.get("x-replayed"), "true");
  assert.deepEqual(await replay.json(), { error: "card declined" });
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() uses a custom fingerprint and header", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler, {
    scope: "global",
    header: "X-Request-Id",
    fingerprint: (req) => req.headers.get("x-account") ?? "",
  });
  const send = (account: string, body: string) =>
    guarded(
      new Request("http://api.test/p", {
        method: "POST",
        headers: { "x-request-id": "r1", "x-account": account },
        body,
      }),
    );
  await (await send("acc-1", "a")).text();
  assert.equal(
    (await send("acc-1", "a different body")).headers.get(
      "idempotent-replayed",
    ),
    "true",
  );
  assert.equal((await send("acc-2", "a")).status, 422);
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() validates its options eagerly", () => {
  const ok = () => new Response();
  assert.throws(
    () => idempotency(ok, { scope: "global", ttl: -1 }),
    /'ttl' must be a positive integer of milliseconds: current value is -1/,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", lease: 0 }),
    RangeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", lease: 10, ttl: 5 }),
    /'lease' must not exceed 'ttl'/,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", maxRequestBytes: 1.5 }),
    RangeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", maxResponseBytes: -1 }),
    RangeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", methods: [] }),
    TypeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", header: "bad header" }),
    TypeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", replayHeader: "" }),
    TypeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", required: "yes" as never }),
    TypeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", onEvent: 1 as never }),
    TypeError,
  );
  assert.throws(
    () => idempotency(ok, { scope: "global", store: {} as never }),
    /'store' must implement IdempotencyStore/,
  );
  assert.throws(
    () => idempotency(null as never, { scope: "global" }),
    TypeError,
  );
});

Deno.test("idempotency() ignores a listener that throws", async () => {
  const guarded = idempotency(() => new Response("fine"), {
    scope: "global",
    onEvent: () => {
      throw new Error("listener bug");
    },
  });
  assert.equal(await (await guarded(post("l"))).text(), "fine");
});

Deno.test("idempotency() reports the events of a request's life with its slot and timing", async () => {
  const log = recorder();
  const guarded = idempotency(() => new Response("ok"), {
    scope: "global",
    onEvent: log.onEvent,
  });
  await (await guarded(post("ev"))).text();
  const slot = slotOf("", "ev");
  for (const event of log.events) {
    assert.equal(event.slot, slot);
    assert.ok(event.elapsedMs >= 0);
  }
  const completed = log.events.find((e) => e.type === "completed");
  assert.ok(
    completed?.type === "completed" && completed.stored === "full" &&
      completed.bytes === 2 && completed.outcome === "applied",
  );
});

Deno.test("idempotency() stores a hash of a custom fingerprint, never what it returned", async () => {
  const store = new MemoryStore();
  const secret = "card=4242424242424242;".repeat(5_000); // over 64 KiB, and private
  const guarded = idempotency(() => new Response("ok"), {
    scope: "global",
    store,
    fingerprint: () => secret,
  });
  await (await guarded(post("fp-hash"))).text();
  const record = await store.claim(slotOf("", "fp-hash"), {
    fingerprint: "x",
    leaseMs: 1_000,
    ttlMs: 60_000,
  });
  assert.equal(record.state, "completed");
  if (record.state === "completed") {
    assert.match(record.fingerprint, /^[0-9a-f]{64}$/);
  }
});

Deno.test("idempotency() and slotOf() take a secret of 32 bytes or more, and say why not a shorter one", () => {
  const ok = () => new Response();
  const short = "a".repeat(31);
  for (const secret of ["", short, new Uint8Array(31), "é".repeat(15)]) {
    for (
      const make of [
        () => idempotency(ok, { scope: "global", secret }),
        () => idempotent({ scope: "global", secret }),
        () => slotOf("", "k", { secret }),
      ]
    ) {
      assert.throws(make, (e: unknown) => {
        assert.ok(e instanceof RangeError);
        assert.match(
          e.message,
          /^'secret' must be at least 32 bytes \(as UTF-8\) and random: a shorter one can be guessed from a store dump, .*: current length is \d+$/,
        );
        assert.ok(!e.message.includes(short)); // Never the secret itself.
        return true;
      });
    }
  }
  for (const secret of [null, 42, ["a".repeat(32)], new ArrayBuffer(32)]) {
    assert.throws(
      () => idempotency(ok, { scope: "global", secret: secret as never }),
      /^TypeError: 'secret' must be a string or a Uint8Array: current value is (null|of type number|of type object)$/,
    );
  }
  // 32 bytes: as ASCII, as UTF-8 (16 characters), as bytes.
  for (const secret of ["a".repeat(32), "é".repeat(16), new Uint8Array(32)]) {
    idempotency(ok, { scope: "global", secret });
    assert.match(slotOf("", "k", { secret }), /^[0-9a-f]{64}$/);
  }
});

Deno.test("idempotency() refuses to guard a method that the handler's request could not carry (CONNECT, TRACE, TRACK)", () => {
  const ok = () => new Response();
  // `new Request()` refuses these methods, so a guarded one would be claimed
  // and then fail to reach the handler: a 500, and the key held for a lease.
  for (const method of ["CONNECT", "trace", "Track"]) {
    assert.throws(
      () => idempotency(ok, { scope: "global", methods: ["POST", method] }),
      /'methods' cannot guard/,
      method,
    );
  }
});

/**
 * Guards a handler on `store` scoped by the `x-account` header, sends key `k`
 * as accounts a and b, and checks that each record is found by its slot
 * alone: the slot of (account, key), and nothing under the bare key.
 */
async function keyedBySlotAlone(store: IdempotencyStore): Promise<void> {
  const { state, handler } = counting((req) =>
    new Response(req.headers.get("x-account"), { status: 201 })
  );
  const guarded = idempotency(handler, {
    store,
    scope: (req) => req.headers.get("x-account") ?? "anonymous",
  });
  const as = (account: string) =>
    post("k", "{}", { headers: { "x-account": account } });
  assert.equal(await (await guarded(as("a"))).text(), "a");
  assert.equal(await (await guarded(as("b"))).text(), "b");
  const replay = await guarded(as("a"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(await replay.text(), "a");
  assert.equal(state.runs, 2);
  const claim = (slot: string) =>
    store.claim(slot, { fingerprint: "x", leaseMs: 1_000, ttlMs: 60_000 });
  assert.equal((await claim(slotOf("a", "k"))).state, "completed");
  assert.equal((await claim(slotOf("b", "k"))).state, "completed");
  assert.equal((await claim(slotOf("", "k"))).state, "acquired");
}

integrationTest(
  "PostgresStore keeps a record by its slot alone: the primary key is the slot, no scope or key column",
  POSTGRES_IGNORE,
  async () => {
    await using pg = await postgresStore("scope_slot");
    await keyedBySlotAlone(pg.store);
    const key = await pg.sql<{ column_name: string }[]>`
      SELECT k.column_name FROM information_schema.table_constraints t
      JOIN information_schema.key_column_usage k
        ON k.constraint_name = t.constraint_name
        AND k.table_schema = t.table_schema
      WHERE t.table_schema = ${pg.schema} AND t.table_name = 'keys'
        AND t.constraint_type = 'PRIMARY KEY'`;
    assert.deepEqual(key.map((r) => r.column_name), ["slot"]);
    const columns = await pg.sql<{ column_name: string }[]>`
      SELECT column_name FROM information_schema.columns
      WHERE table_schema = ${pg.schema} AND table_name = 'keys'`;
    for (const { column_name } of columns) {
      assert.doesNotMatch(column_name, /scope|tenant|key|principal/);
    }
    const rows = await pg.sql<{ slot: string }[]>`
      SELECT slot FROM ${pg.sql(pg.schema)}.keys ORDER BY slot`;
    assert.deepEqual(
      rows.map((r) => r.slot),
      [slotOf("a", "k"), slotOf("b", "k"), slotOf("", "k")].sort(),
    );
  },
);

integrationTest(
  "FailoverStore (RedisStore, PostgresStore) keeps a record by its slot alone",
  REDIS_IGNORE || POSTGRES_IGNORE,
  async () => {
    await using pg = await postgresStore("scope_failover");
    const prefix = `${uniquePrefix("scope")}:`;
    const client = await createClient({ url: REDIS_URL }).connect();
    try {
      const primary = new RedisStore({ client, prefix });
      await keyedBySlotAlone(
        new FailoverStore({ primary, fallback: pg.store }),
      );
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
);

Deno.test("idempotency() takes each numeric option from its documented minimum to the largest safe integer, and refuses one past either end", () => {
  const ok = () => new Response();
  const MAX = Number.MAX_SAFE_INTEGER;
  // Wide enough that the relations between options never decide.
  const room = { ttl: MAX, completionTimeout: MAX };
  const durations = [
    "ttl",
    "lease",
    "completionWait",
    "completionTimeout",
    "waitForInFlight",
  ];
  const bounds = {
    ttl: 1,
    lease: 1,
    maxRequestBytes: 0,
    maxResponseBytes: 0,
    completionWait: 0,
    completionTimeout: 1,
    maxPendingCompletions: 0,
    waitForInFlight: 0,
    maxWaiting: 0,
  } as const;
  for (const [name, min] of Object.entries(bounds)) {
    // maxWaiting does nothing unless duplicates wait.
    const waits = name === "maxWaiting" ? { waitForInFlight: 1 } : {};
    const make = (value: number) =>
      idempotency(ok, { scope: "global", ...room, ...waits, [name]: value });
    const word = min === 1 ? "positive" : "non-negative";
    const unit = durations.includes(name) ? " of milliseconds" : "";
    const refused = (value: number) =>
      new RegExp(
        `^RangeError: '${name}' must be a ${word} integer${unit}: current value is ${value}$`,
      );
    for (const value of [min, min + 1, MAX]) {
      if (name === "ttl" || name === "completionTimeout") {
        // Its partner (lease, completionWait) must fit under it.
        idempotency(ok, {
          scope: "global",
          lease: 1,
          completionWait: 0,
          [name]: value,
        });
      } else make(value);
    }
    assert.throws(() => make(min - 1), refused(min - 1), name);
    assert.throws(() => make(MAX + 1), refused(MAX + 1), name);
    assert.throws(() => make(min + 0.5), refused(min + 0.5), name);
  }
});

Deno.test("idempotency() takes a lease up to its ttl and a completionWait up to its completionTimeout, and refuses one more", () => {
  const ok = () => new Response();
  const guard = (options: Partial<IdempotencyOptions>) =>
    idempotency(ok, { scope: "global", ...options });
  guard({ ttl: 1_000, lease: 999 });
  guard({ ttl: 1_000, lease: 1_000 });
  assert.throws(
    () => guard({ ttl: 1_000, lease: 1_001 }),
    /^RangeError: 'lease' must not exceed 'ttl' \(1000\): current value is 1001$/,
  );
  // The defaults: a lease of 30 s within any ttl from 30 s; a ttl of 24 h.
  guard({ ttl: 30_000 });
  guard({ lease: 86_400_000 });
  assert.throws(
    () => guard({ lease: 86_400_001 }),
    /'lease' must not exceed 'ttl' \(86400000\)/,
  );
  assert.throws(() => guard({ ttl: 29_999 }), /'lease' must not exceed 'ttl'/);
  guard({ completionTimeout: 500, completionWait: 499 });
  guard({ completionTimeout: 500, completionWait: 500 });
  assert.throws(
    () => guard({ completionTimeout: 500, completionWait: 501 }),
    /^RangeError: 'completionWait' must not exceed 'completionTimeout' \(500\): current value is 501$/,
  );
  // The defaults: a completionWait of 1 s within any completionTimeout from 1 s.
  guard({ completionTimeout: 1_000 });
  // A completionTimeout of 5 minutes.
  guard({ completionWait: 300_000 });
  assert.throws(
    () => guard({ completionWait: 300_001 }),
    /'completionWait' must not exceed 'completionTimeout' \(300000\)/,
  );
  assert.throws(
    () => guard({ completionTimeout: 999 }),
    /'completionWait' must not exceed 'completionTimeout'/,
  );
});

Deno.test("idempotency() and FailoverStore refuse a store lacking any of its four methods, naming it, in one wording", () => {
  const ok = () => new Response("ok");
  for (const missing of ["claim", "complete", "release", "extend"]) {
    const store = new MemoryStore();
    const partial = Object.fromEntries(
      ["claim", "complete", "release", "extend"]
        .filter((m) => m !== missing)
        .map((
          m,
        ) => [m, (store as unknown as Record<string, () => unknown>)[m]]),
    ) as unknown as IdempotencyStore;
    const wording =
      `must implement IdempotencyStore: it has no ${missing}() method`;
    assert.throws(
      () => idempotency(ok, { scope: "global", store: partial }),
      new TypeError(`'store' ${wording}`),
    );
    assert.throws(
      () => new FailoverStore({ primary: partial, fallback: store }),
      new TypeError(`'primary' ${wording}`),
    );
    assert.throws(
      () => new FailoverStore({ primary: store, fallback: partial }),
      new TypeError(`'fallback' ${wording}`),
    );
  }
});
