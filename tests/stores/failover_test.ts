// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * FailoverStore: the conformance suite on Redis + PostgreSQL and on two
 * MemoryStores; the routing rules on MemoryStores; and, with a redis-server
 * that the test starts, kills and restarts on its own port, an outage and a
 * recovery driven through the middleware, a split brain between two
 * instances that disagree on whether Redis is up, and `strict` mode with
 * PostgreSQL unreachable.
 *
 * node-redis and postgres.js keep sockets and timers of their own for a while
 * after they close, so the integration tests turn the op and resource
 * sanitizers off (as the Redis and PostgreSQL store tests do).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import postgres from "postgres";
import { idempotency } from "../../src/idempotency.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import {
  type FailoverEvent,
  FailoverStore,
} from "../../src/stores/failover.ts";
import {
  type ClaimOptions,
  type ClaimResult,
  type IdempotencyStore,
  type StoredResponse,
  StoreError,
  type StoreOperation,
} from "../../src/store.ts";
import { type PoisonKind, storeConformance } from "../../src/testing.ts";
import {
  DATABASE_URL,
  integrationTest,
  POSTGRES_IGNORE,
  type PrivateRedis,
  REDIS_IGNORE,
  REDIS_URL,
  startRedisServer,
  uniquePrefix,
} from "../_support/services.ts";
import {
  deleteRedisKeys,
  plantRedisPoison,
  redisRecordState,
} from "../_support/redis.ts";
import { FakeClock, sleep, waitFor } from "../_support/time.ts";
import { freePort, post } from "../_support/http.ts";
import { StoreWrapper } from "../_support/stores.ts";

/** The middleware's slot for a key (the slot depends on scope and key only). */
async function slotOf(key: string): Promise<string> {
  let slot: string | null = null;
  const probe = idempotency(() => new Response("probe"), {
    scope: "global",
    store: new MemoryStore(),
    onEvent: (e: IdempotencyEvent) => {
      if (e.type === "claimed") slot = e.slot;
    },
  });
  await (await probe(post(key))).text();
  assert.ok(slot !== null);
  return slot;
}

const SERVICES_IGNORE: false | string = REDIS_IGNORE || POSTGRES_IGNORE;

type NodeRedis = ReturnType<typeof createClient>;
type Sql = ReturnType<typeof postgres>;

const opts = (
  fingerprint: string,
  more: Partial<ClaimOptions> = {},
): ClaimOptions => ({ fingerprint, leaseMs: 30_000, ttlMs: 60_000, ...more });

const ok = (text: string): StoredResponse => ({
  status: 201,
  headers: [["content-type", "text/plain"]],
  body: new TextEncoder().encode(text),
});

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

function token(result: ClaimResult): string {
  assert.equal(
    result.state,
    "acquired",
    `expected acquired, got ${JSON.stringify(result)}`,
  );
  return (result as { token: string }).token;
}

/** The inner tokens of a `b:` token (its format is documented). */
function split(both: string): { primary: string; fallback: string } {
  const match = /^b:(\d+)\.(\d+):/.exec(both);
  assert.ok(match, `not a b: token: ${both}`);
  const start = match[0].length;
  const p = Number(match[1]);
  return {
    primary: both.slice(start, start + p),
    fallback: both.slice(start + p),
  };
}

/** A connected node-redis client that fails fast while the server is down. */
async function nodeRedis(url: string): Promise<NodeRedis> {
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: { reconnectStrategy: () => 50, connectTimeout: 500 },
  });
  client.on("error", () => {});
  await client.connect();
  return client;
}

function pg(url: string = DATABASE_URL, more: Record<string, unknown> = {}) {
  return postgres(url, { onnotice: () => {}, ...more });
}

/** A PostgresStore on a fresh schema, and how to drop it. */
async function pgFallback(): Promise<{
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

/**
 * A redis-server of the test's own, a node-redis client on it and a
 * PostgreSQL fallback on a fresh schema, all stopped on dispose.
 */
async function outageRig(): Promise<
  AsyncDisposable & {
    server: PrivateRedis;
    client: NodeRedis;
    fallback: Awaited<ReturnType<typeof pgFallback>>;
  }
> {
  const stack = new AsyncDisposableStack();
  try {
    const server = stack.use(await startRedisServer());
    const client = await nodeRedis(server.url);
    stack.defer(() => void client.destroy());
    const fallback = await pgFallback();
    stack.defer(() => fallback.drop());
    const moved = stack.move();
    return {
      server,
      client,
      fallback,
      [Symbol.asyncDispose]: () => moved.disposeAsync(),
    };
  } catch (error) {
    await stack.disposeAsync();
    throw error;
  }
}

/** A store that throws like an unreachable one while `down` (unit tests only). */
class Switchable extends StoreWrapper {
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

/** Asserts that `call` rejects with a StoreError carrying both stores' errors. */
async function failsWithBothCauses(
  call: Promise<unknown>,
  operation: string,
): Promise<void> {
  const error = await call.then(() => null, (e: unknown) => e);
  assert.ok(error instanceof StoreError);
  assert.equal(error.operation, operation);
  assert.ok(error.cause instanceof AggregateError);
  assert.equal(error.cause.errors.length, 2);
}

function memoryPair(): {
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

function integration(name: string, fn: () => Promise<void>): void {
  integrationTest(name, SERVICES_IGNORE, fn);
}

// --- the shared suite -------------------------------------------------------

storeConformance({
  name: "FailoverStore (MemoryStore, MemoryStore)",
  setup() {
    const time = new FakeClock();
    const clock = () => time.now();
    const advance = (ms: number) => time.advance(ms);
    return Promise.resolve({
      store: new FailoverStore({
        primary: new MemoryStore({ clock }),
        fallback: new MemoryStore({ clock }),
      }),
      elapse: advance,
      advanceClock: advance,
    });
  },
});

storeConformance({
  name: "FailoverStore (RedisStore, PostgresStore)",
  ignore: SERVICES_IGNORE,
  leaseMs: 300,
  async setup() {
    const client = await nodeRedis(REDIS_URL);
    const prefix = `${uniquePrefix("failconf")}:`;
    const fallback = await pgFallback();
    const store = new FailoverStore({
      primary: new RedisStore({ client, prefix }),
      fallback: fallback.store,
    });
    return {
      store,
      elapse: sleep,
      // Unreadable values planted in the primary: it answers in flight, and
      // the fallback is never consulted.
      poison: (slot: string, kind: PoisonKind) =>
        plantRedisPoison(
          (args) => client.sendCommand(args),
          prefix + slot,
          kind,
        ),
      async teardown() {
        try {
          await deleteRedisKeys(prefix);
        } finally {
          client.destroy();
          await fallback.drop();
        }
      },
    };
  },
});

// --- routing and outcomes, on MemoryStores ----------------------------------

Deno.test("FailoverStore validates its options", () => {
  const m = new MemoryStore();
  assert.throws(
    () =>
      new FailoverStore({
        primary: {} as IdempotencyStore,
        fallback: m,
      }),
    TypeError,
  );
  assert.throws(
    () => new FailoverStore({ primary: m, fallback: m }),
    TypeError,
  );
  assert.throws(
    () =>
      new FailoverStore({
        primary: m,
        fallback: new MemoryStore(),
        strict: "yes" as unknown as boolean,
      }),
    TypeError,
  );
});

Deno.test("FailoverStore.claim() on a fresh slot owns both stores with a b: token", async () => {
  const { primary, fallback, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  assert.match(t, /^b:\d+\.\d+:/);
  const inner = split(t);
  // Each store holds its own claim under its own token.
  assert.equal(await primary.inner.extend("s", inner.primary, 1000), "applied");
  assert.equal(
    await fallback.inner.extend("s", inner.fallback, 1000),
    "applied",
  );
  assert.equal(await primary.inner.extend("s", inner.fallback, 1000), "lost");
  assert.equal(await store.complete("s", t, ok("one")), "applied");
  // Both hold the completed record.
  assert.equal((await primary.inner.claim("s", opts("fp"))).state, "completed");
  assert.equal(
    (await fallback.inner.claim("s", opts("fp"))).state,
    "completed",
  );
  assert.deepEqual(events, []);
});

Deno.test("FailoverStore answers a primary hit with one primary round trip", async () => {
  const { primary, fallback, store } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  assert.equal((await store.claim("s", opts("fp"))).state, "in_flight");
  await store.complete("s", t, ok("one"));
  primary.calls = 0;
  fallback.calls = 0;
  assert.equal((await store.claim("s", opts("fp"))).state, "completed");
  assert.equal(primary.calls, 1);
  assert.equal(fallback.calls, 0);
});

Deno.test("FailoverStore writes with malformed or foreign tokens are lost everywhere", async () => {
  const { store, primary, fallback } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  const inner = split(t);
  for (
    const bad of [
      "",
      "x",
      "q:abc",
      inner.primary,
      `${t}x`,
      t.slice(0, -1),
      `b:0.${inner.fallback.length}:${inner.fallback}`,
      `p:${inner.fallback}`,
      `f:${inner.primary}`,
    ]
  ) {
    assert.equal(await store.extend("s", bad, 1000), "lost", bad);
    assert.equal(await store.complete("s", bad, ok("bad")), "lost", bad);
    assert.equal(await store.release("s", bad), "lost", bad);
  }
  // Nothing changed in either store.
  assert.equal((await primary.inner.claim("s", opts("x"))).state, "in_flight");
  assert.equal((await fallback.inner.claim("s", opts("x"))).state, "in_flight");
  assert.equal(await store.complete("s", t, ok("real")), "applied");
});

Deno.test("FailoverStore falls back while the primary throws, and recovers the record after", async () => {
  const { primary, fallback, store, events } = memoryPair();
  primary.down = true;
  const t = token(await store.claim("s", opts("fp")));
  assert.ok(t.startsWith("f:"));
  assert.equal(events[0]?.type, "fallback");
  primary.down = false;
  // An f: token never reaches the primary, even once it is back.
  primary.calls = 0;
  assert.equal(await store.extend("s", t, 1000), "applied");
  assert.equal(await store.complete("s", t, ok("outage")), "applied");
  assert.equal(primary.calls, 0);
  // The retry: primary miss, fallback completed, copied.
  const again = await store.claim("s", opts("fp"));
  assert.equal(again.state, "completed");
  assert.deepEqual(events.map((e) => e.type), ["fallback", "recovered"]);
  assert.deepEqual(events[1], { type: "recovered", slot: "s", copied: true });
  fallback.calls = 0;
  assert.equal((await store.claim("s", opts("fp"))).state, "completed");
  assert.equal(fallback.calls, 0, "the next retry is served by the primary");
});

Deno.test("FailoverStore does not copy a record claimed with another fingerprint into the primary", async () => {
  const { primary, store, events } = memoryPair();
  primary.down = true;
  const t = token(await store.claim("s", opts("original")));
  await store.complete("s", t, ok("outage"));
  primary.down = false;
  // The key reused for another request: the middleware will answer 422.
  const reused = await store.claim("s", opts("other"));
  assert.equal(reused.state, "completed");
  if (reused.state === "completed") {
    assert.equal(reused.fingerprint, "original");
  }
  assert.deepEqual(events.at(-1), {
    type: "recovered",
    slot: "s",
    copied: false,
  });
  // Had it been copied, the primary would hold fingerprint "other", and the
  // original's retry would be refused as a mismatch.
  const retry = await store.claim("s", opts("original"));
  assert.equal(retry.state, "completed");
  if (retry.state === "completed") assert.equal(retry.fingerprint, "original");
  const direct = await primary.inner.claim("s", opts("original"));
  if (direct.state === "completed") {
    assert.equal(direct.fingerprint, "original");
  }
});

Deno.test("FailoverStore releases the primary claim when the fallback holds the slot in flight", async () => {
  const { primary, store } = memoryPair();
  primary.down = true;
  const owner = token(await store.claim("s", opts("fp")));
  primary.down = false;
  const seen = await store.claim("s", opts("fp"));
  assert.equal(seen.state, "in_flight");
  // The primary holds nothing: its claim was released.
  assert.equal(
    (await primary.inner.claim("s", opts("probe"))).state,
    "acquired",
  );
  assert.equal(await store.complete("s", owner, ok("x")), "applied");
});

Deno.test("FailoverStore keeps renewing a b: claim whose primary record vanished (a Redis restart)", async () => {
  const { primary, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  // The primary loses the record, as a restarted Redis without persistence does.
  assert.equal(await primary.inner.release("s", split(t).primary), "applied");
  // The heartbeat's extend must stay `applied`: a `lost` would stop it, the
  // fallback's lease would run out while the handler runs, and a retry would
  // take the slot over and run the handler a second time.
  assert.equal(await store.extend("s", t, 30_000), "applied");
  assert.deepEqual(events.at(-1), {
    type: "diverged",
    operation: "extend",
    slot: "s",
    primary: "lost",
    fallback: "applied",
  });
  assert.equal((await store.claim("s", opts("fp"))).state, "in_flight");
  assert.equal(await store.complete("s", t, ok("done")), "applied");
  assert.equal((await store.claim("s", opts("fp"))).state, "completed");
});

Deno.test("FailoverStore b: writes: one store throwing leaves the other's answer; both throwing throws", async () => {
  const { primary, fallback, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  primary.down = true;
  assert.equal(await store.extend("s", t, 30_000), "applied");
  assert.equal(events.at(-1)?.type, "write_failed");
  primary.down = false;
  fallback.down = true;
  assert.equal(await store.extend("s", t, 30_000), "applied");
  const last = events.at(-1);
  assert.ok(last?.type === "write_failed" && last.store === "fallback");
  primary.down = true;
  await failsWithBothCauses(store.complete("s", t, ok("x")), "complete");
});

Deno.test("FailoverStore b: writes are lost when the store whose answer stands lost the slot", async () => {
  const { primary, fallback, store, events } = memoryPair();
  const t = token(await store.claim("s", opts("fp")));
  // The fallback lost the slot, the primary did not: the fallback's answer.
  assert.equal(await fallback.inner.release("s", split(t).fallback), "applied");
  assert.equal(await store.extend("s", t, 30_000), "lost");
  assert.deepEqual(events.at(-1), {
    type: "diverged",
    operation: "extend",
    slot: "s",
    primary: "applied",
    fallback: "lost",
  });
  // One store throws: the other's "lost" stands, from either side.
  primary.down = true;
  assert.equal(await store.extend("s", t, 30_000), "lost");
  primary.down = false;
  const u = token(await store.claim("u", opts("fp")));
  assert.equal(await primary.inner.release("u", split(u).primary), "applied");
  fallback.down = true;
  assert.equal(await store.extend("u", u, 30_000), "lost");
  assert.ok(events.at(-1)?.type === "write_failed");
});

Deno.test("FailoverStore.claim() throws a StoreError with both causes when both stores are down", async () => {
  const { primary, fallback, store } = memoryPair();
  primary.down = true;
  fallback.down = true;
  await failsWithBothCauses(store.claim("s", opts("fp")), "claim");
});

Deno.test("FailoverStore ignores an onEvent that throws", async () => {
  const primary = new Switchable(new MemoryStore());
  primary.down = true;
  const store = new FailoverStore({
    primary,
    fallback: new MemoryStore(),
    onEvent: () => {
      throw new Error("listener bug");
    },
  });
  assert.ok(token(await store.claim("s", opts("fp"))).startsWith("f:"));
});

Deno.test("FailoverStore through the middleware: the fallback mirror survives a primary that forgets", async () => {
  const primary = new Switchable(new MemoryStore());
  const fallback = new MemoryStore();
  let runs = 0;
  const store = new FailoverStore({ primary, fallback });
  const handler = idempotency(() => {
    runs++;
    return new Response(`run ${runs}`, { status: 201 });
  }, { scope: "global", store });
  assert.equal((await handler(post("k"))).status, 201);
  // The primary restarts empty.
  (primary as { inner: IdempotencyStore }).inner = new MemoryStore();
  const retry = await handler(post("k"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(await retry.text(), "run 1");
  assert.equal(runs, 1);
});

Deno.test("FailoverStore on two MemoryStores runs a key once through the middleware and replays it", async () => {
  let runs = 0;
  const store = new FailoverStore({
    primary: new MemoryStore(),
    fallback: new MemoryStore(),
  });
  const handler = idempotency(() => {
    runs++;
    return new Response("charged", { status: 201 });
  }, { scope: "global", store });
  assert.equal((await handler(post("c-1"))).status, 201);
  const retry = await handler(post("c-1"));
  assert.equal(retry.headers.get("Idempotent-Replayed"), "true");
  assert.equal(runs, 1);
});

Deno.test("FailoverStore.migrate() resolves on stores without migrate(), and claims go on", async () => {
  const store = new FailoverStore({
    primary: new MemoryStore(),
    fallback: new MemoryStore(),
  });
  await store.migrate();
  assert.equal((await store.claim("slot-1", opts("f"))).state, "acquired");
});

Deno.test("FailoverStore refuses a claim, loudly, while its fallback has never answered", async () => {
  const missingTable: IdempotencyStore = {
    claim: () =>
      Promise.reject(new Error('relation "idempotency_keys" does not exist')),
    complete: () => Promise.resolve("lost"),
    release: () => Promise.resolve("lost"),
    extend: () => Promise.resolve("lost"),
  };
  const store = new FailoverStore({
    primary: new MemoryStore(),
    fallback: missingTable,
  });
  // A 503 through the middleware, not a silent success.
  await assert.rejects(store.claim("slot-1", opts("f")), StoreError);
});

/** What `claim` settles with: a token's route, or the refusal's message. */
function settled(claim: Promise<ClaimResult>): Promise<string> {
  return claim.then(
    (result) => token(result).slice(0, 2),
    (error: unknown) => {
      assert.ok(error instanceof StoreError, String(error));
      return error.message;
    },
  );
}

Deno.test("FailoverStore trusts a fallback that has served claims while the primary was down", async () => {
  const { primary, fallback, events, store } = memoryPair();
  primary.down = true;
  assert.equal(await settled(store.claim("a", opts("fp"))), "f:");
  primary.down = false;
  fallback.down = true;
  // The fallback answered once: its outage now grants the primary alone.
  assert.equal(await settled(store.claim("b", opts("fp"))), "p:");
  assert.deepEqual(events.map((e) => e.type), [
    "fallback",
    "fallback_unavailable",
  ]);
});

Deno.test("FailoverStore trusts a fallback that has answered a claim of both stores", async () => {
  const { fallback, events, store } = memoryPair();
  assert.equal(await settled(store.claim("a", opts("fp"))), "b:");
  fallback.down = true;
  assert.equal(await settled(store.claim("b", opts("fp"))), "p:");
  assert.deepEqual(events.map((e) => e.type), ["fallback_unavailable"]);
});

Deno.test("FailoverStore refuses a claim while its fallback has never answered, and releases the primary's", async () => {
  const { primary, fallback, events, store } = memoryPair();
  fallback.down = true;
  const refusal = await settled(store.claim("a", opts("fp")));
  assert.match(refusal, /has not answered once/);
  assert.deepEqual(events.map((e) => e.type), ["fallback_unavailable"]);
  assert.equal((await primary.inner.claim("a", opts("fp"))).state, "acquired");
  assert.match(await settled(store.claim("b", opts("fp"))), /not answered/);
});

Deno.test("FailoverStore strict refuses a claim on the primary alone, even from a trusted fallback", async () => {
  const primary = new Switchable(new MemoryStore());
  const fallback = new Switchable(new MemoryStore());
  const store = new FailoverStore({ primary, fallback, strict: true });
  assert.equal(await settled(store.claim("a", opts("fp"))), "b:");
  fallback.down = true;
  assert.match(await settled(store.claim("b", opts("fp"))), /'strict'/);
  assert.equal((await primary.inner.claim("b", opts("fp"))).state, "acquired");
});

Deno.test("FailoverStore asks the fallback when the primary answers in flight: an orphan there does not hide a completed run", async () => {
  const { primary, fallback, events, store } = memoryPair();
  // The run went through the fallback while the primary was down...
  const served = token(await fallback.inner.claim("s", opts("fp")));
  assert.equal(
    await fallback.inner.complete("s", served, ok("done")),
    "applied",
  );
  // ...and the primary's claim of that request landed late: an orphan.
  token(await primary.inner.claim("s", opts("fp")));
  const retry = await store.claim("s", opts("fp"));
  assert.equal(retry.state, "completed");
  assert.deepEqual(events.map((e) => e.type), ["recovered"]);
});

Deno.test("FailoverStore keeps a real in-flight claim in flight, and its fallback look-up leaves no claim behind", async () => {
  const { primary, fallback, store } = memoryPair();
  token(await store.claim("t", opts("fp")));
  assert.equal((await store.claim("t", opts("fp"))).state, "in_flight");
  token(await primary.inner.claim("u", opts("fp"))); // held by the primary alone
  assert.equal((await store.claim("u", opts("fp"))).state, "in_flight");
  assert.equal((await fallback.inner.claim("u", opts("fp"))).state, "acquired");
});

Deno.test("FailoverStore leaves the primary's in flight when the fallback is unreachable", async () => {
  const { fallback, store } = memoryPair();
  token(await store.claim("t", opts("fp")));
  fallback.down = true;
  assert.equal((await store.claim("t", opts("fp"))).state, "in_flight");
});

// --- integration: a real outage of a test-owned Redis -----------------------

integration(
  "FailoverStore keeps serving through PostgreSQL while Redis is down, and never runs a key twice after Redis comes back empty",
  async () => {
    await using rig = await outageRig();
    const { server, client, fallback } = rig;
    const prefix = "idem:";
    const primary = new RedisStore({ client, prefix, timeoutMs: 300 });
    const events: FailoverEvent[] = [];
    const store = new FailoverStore({
      primary,
      fallback: fallback.store,
      onEvent: (e) => events.push(e),
    });
    const runs = new Map<string, number>();
    const handler = idempotency((req) => {
      const key = req.headers.get("idempotency-key")!;
      runs.set(key, (runs.get(key) ?? 0) + 1);
      return new Response(`${key} ran`, { status: 201 });
    }, { scope: "global", store });
    const send = async (key: string) => {
      const res = await handler(post(key));
      return {
        status: res.status,
        replayed: res.headers.get("idempotent-replayed") === "true",
        text: await res.text(),
      };
    };
    const types = () => events.map((e) => e.type);

    // 1. Healthy: A runs once and replays.
    assert.deepEqual(await send("A"), {
      status: 201,
      replayed: false,
      text: "A ran",
    });
    assert.equal((await send("A")).replayed, true);
    assert.equal(runs.get("A"), 1);
    assert.deepEqual(types(), []);

    // 2. Redis dies: B runs once through PostgreSQL and replays; A replays
    // from the fallback's mirror.
    await server.kill();
    await waitFor("the client to notice", () => !client!.isReady);
    assert.deepEqual(await send("B"), {
      status: 201,
      replayed: false,
      text: "B ran",
    });
    assert.equal(runs.get("B"), 1);
    assert.equal(events.at(-1)?.type, "fallback");
    const outageB = await send("B");
    assert.equal(outageB.replayed, true);
    assert.equal(outageB.text, "B ran");
    const outageA = await send("A");
    assert.equal(outageA.replayed, true);
    assert.equal(outageA.text, "A ran");
    assert.ok(types().every((t) => t === "fallback"), types().join());
    // Token routing: a claim made in the outage is an f: claim.
    const routed = "routing:1";
    const routedToken = token(await store.claim(routed, opts("r")));
    assert.ok(routedToken.startsWith("f:"), routedToken);

    // 3. Redis comes back, empty (no persistence).
    await server.restart();
    await waitFor("the client to reconnect", () => client!.isReady);
    assert.equal(await client.dbSize(), 0);

    // The f: token goes to PostgreSQL only, though Redis is up again.
    assert.equal(
      await store.complete(routed, routedToken, ok("routed")),
      "applied",
    );
    assert.equal(await client.exists(prefix + routed), 0);
    assert.equal(
      (await fallback.store.claim(routed, opts("r"))).state,
      "completed",
    );

    events.length = 0;
    const afterB = await send("B");
    assert.equal(afterB.replayed, true);
    assert.equal(afterB.text, "B ran");
    assert.equal(runs.get("B"), 1);
    assert.deepEqual(types(), ["recovered"]);
    // The next retry of B is served by Redis: the record was copied there.
    const slotB = await slotOf("B");
    const direct = await primary.claim(slotB, opts("probe"));
    assert.equal(direct.state, "completed");
    events.length = 0;
    assert.equal((await send("B")).replayed, true);
    assert.deepEqual(types(), [], "served by the primary alone");

    // A was recorded in both before the outage; the restarted Redis lost
    // it, the PostgreSQL mirror did not.
    const afterA = await send("A");
    assert.equal(afterA.replayed, true);
    assert.equal(afterA.text, "A ran");
    assert.equal(runs.get("A"), 1);
    assert.deepEqual(types(), ["recovered"]);
  },
);

integration(
  "FailoverStore in a split brain (one instance sees Redis down, one up) runs a key exactly once",
  async () => {
    // A client pointed at a closed port, retrying in the background: its
    // commands fail at once (no offline queue). node-redis resolves
    // connect() only once connected, so it is not awaited.
    const dead = createClient({
      url: `redis://127.0.0.1:${freePort()}`,
      disableOfflineQueue: true,
      socket: { reconnectStrategy: () => 50, connectTimeout: 300 },
    });
    dead.on("error", () => {});
    const connecting = dead.connect().catch(() => {});
    const healthy = await nodeRedis(REDIS_URL);
    const prefix = `${uniquePrefix("failsplit")}:`;
    const fallback = await pgFallback();
    try {
      const blindEvents: FailoverEvent[] = [];
      const blind = new FailoverStore({
        primary: new RedisStore({ client: dead, prefix, timeoutMs: 300 }),
        fallback: fallback.store,
        onEvent: (e) => blindEvents.push(e),
      });
      const sighted = new FailoverStore({
        primary: new RedisStore({ client: healthy, prefix, timeoutMs: 300 }),
        fallback: fallback.store,
      });
      let runs = 0;
      const body = async () => {
        runs++;
        await sleep(150);
        return new Response("once", { status: 201 });
      };
      const a = idempotency(body, { scope: "global", store: blind });
      const b = idempotency(body, { scope: "global", store: sighted });
      // Interleaved, then each side with a head start: whichever side
      // claims PostgreSQL first must win, and the other must see it.
      const modes = ["interleaved", "sighted first", "blind first"] as const;
      for (const [round, mode] of modes.entries()) {
        const key = `split-${round}`;
        const before = runs;
        const responses = await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const useBlind = i % 2 === 1;
            const late = (mode === "sighted first" && useBlind) ||
              (mode === "blind first" && !useBlind);
            if (late) await sleep(40);
            return (useBlind ? a : b)(post(key));
          }),
        );
        const statuses = await Promise.all(responses.map(async (r) => {
          await r.body?.cancel();
          return r.status;
        }));
        assert.equal(runs - before, 1, `${mode}: ${statuses}`);
        assert.ok(statuses.every((s) => s === 201 || s === 409), `${statuses}`);
        // Afterwards both instances replay it.
        for (const h of [a, b]) {
          const again = await h(post(key));
          assert.equal(again.headers.get("idempotent-replayed"), "true");
          await again.text();
        }
        assert.equal(runs - before, 1);
      }
      assert.ok(blindEvents.every((e) => e.type === "fallback"));
      assert.ok(blindEvents.length > 0);
    } finally {
      dead.destroy();
      await connecting;
      try {
        await deleteRedisKeys(prefix);
      } finally {
        healthy.destroy();
        await fallback.drop();
      }
    }
  },
);

integration(
  "FailoverStore with PostgreSQL unreachable: strict refuses the claim, the default serves on Redis alone",
  async () => {
    const client = await nodeRedis(REDIS_URL);
    const prefix = `${uniquePrefix("failstrict")}:`;
    const closed = new URL(DATABASE_URL);
    closed.hostname = "127.0.0.1";
    closed.port = String(freePort());
    const sql = pg(closed.href, { max: 1, connect_timeout: 1 });
    try {
      const primary = new RedisStore({ client, prefix, timeoutMs: 500 });
      const unreachable = new PostgresStore({ sql, timeoutMs: 1000 });
      const strictEvents: FailoverEvent[] = [];
      const strict = new FailoverStore({
        primary,
        fallback: unreachable,
        strict: true,
        onEvent: (e) => strictEvents.push(e),
      });
      const error = await strict.claim("s1", opts("fp")).then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(error instanceof StoreError, String(error));
      assert.equal(error.operation, "claim");
      // The primary claim was released: the slot is free in Redis.
      assert.equal((await primary.claim("s1", opts("fp"))).state, "acquired");
      // Through the middleware, strict answers 503.
      let runs = 0;
      const guarded = idempotency(() => {
        runs++;
        return new Response("x", { status: 201 });
      }, { scope: "global", store: strict });
      const refused = await guarded(post("strict-key"));
      await refused.body?.cancel();
      assert.equal(refused.status, 503);
      assert.equal(runs, 0);

      const events: FailoverEvent[] = [];
      // Leniency starts once the fallback has answered once: a fallback
      // whose migrate() resolved (PostgreSQL went down after boot).
      const lenient = new FailoverStore({
        primary,
        fallback: {
          claim: (slot, o) => unreachable.claim(slot, o),
          complete: (slot, t, r) => unreachable.complete(slot, t, r),
          release: (slot, t) => unreachable.release(slot, t),
          extend: (slot, t, ms) => unreachable.extend(slot, t, ms),
          migrate: () => Promise.resolve(),
        } as IdempotencyStore,
        onEvent: (e) => events.push(e),
      });
      await lenient.migrate();
      const t = token(await lenient.claim("s2", opts("fp")));
      assert.ok(t.startsWith("p:"), t);
      assert.equal(events.length, 1);
      assert.equal(events[0]?.type, "fallback_unavailable");
      assert.equal(await lenient.extend("s2", t, 30_000), "applied");
      assert.equal(await lenient.complete("s2", t, ok("p")), "applied");
      assert.equal((await lenient.claim("s2", opts("fp"))).state, "completed");
      assert.equal(events.length, 1, "a primary hit never asks the fallback");
    } finally {
      await deleteRedisKeys(prefix).catch(() => {});
      client.destroy();
      await sql.end({ timeout: 0 });
    }
  },
);

integration(
  "FailoverStore keeps a slow handler's lease alive across a Redis restart: the retry gets 409, not a second run",
  async () => {
    await using rig = await outageRig();
    const { server, client, fallback } = rig;
    let open = () => {};
    try {
      const events: FailoverEvent[] = [];
      const store = new FailoverStore({
        primary: new RedisStore({ client, timeoutMs: 200 }),
        fallback: fallback.store,
        onEvent: (e) => events.push(e),
      });
      const gate = new Promise<void>((resolve) => open = resolve);
      let runs = 0;
      const handler = idempotency(async () => {
        // Only the first run waits: a second one (the bug) answers at once.
        if (++runs === 1) await gate;
        return new Response("slow", { status: 201 });
      }, { scope: "global", store, lease: 300 });
      const first = handler(post("L"));
      await waitFor("the handler to start", () => runs === 1);
      // Redis crashes and comes back empty while the handler runs.
      await server.kill();
      await waitFor("the client to notice", () => !client!.isReady);
      await server.restart();
      await waitFor("the client to reconnect", () => client!.isReady);
      // More than a lease passes: only the renewals in PostgreSQL keep the
      // slot. Renewals come at least a third of a lease apart, so four that
      // Redis lost span more than a lease since the restart.
      await waitFor(
        "four renewals kept by PostgreSQL alone",
        () =>
          events.filter((e) =>
            e.type === "diverged" && e.operation === "extend" &&
            e.primary === "lost" && e.fallback === "applied"
          ).length >= 4,
      );
      const retry = await handler(post("L"));
      await retry.body?.cancel();
      assert.equal(retry.status, 409);
      assert.equal(runs, 1);
      assert.ok(
        events.some((e) =>
          e.type === "diverged" && e.operation === "extend" &&
          e.primary === "lost" && e.fallback === "applied"
        ),
        events.map((e) => e.type).join(),
      );
      open();
      const done = await first;
      assert.equal(done.status, 201);
      await done.text();
      const replay = await handler(post("L"));
      assert.equal(replay.headers.get("idempotent-replayed"), "true");
      assert.equal(await replay.text(), "slow");
      assert.equal(runs, 1);
    } finally {
      open();
    }
  },
);

integration(
  "FailoverStore: a claim that timed out on a paused Redis and landed late does not turn the retries of a run completed through PostgreSQL into 409s",
  async () => {
    await using rig = await outageRig();
    const { server, client, fallback } = rig;
    // Configured as the README recommends: no offline queue, a short
    // timeout.
    const store = new FailoverStore({
      primary: new RedisStore({ client, prefix: "idem:", timeoutMs: 250 }),
      fallback: fallback.store,
    });
    let runs = 0;
    const handler = idempotency(() => {
      runs++;
      return new Response(`run ${runs}`, { status: 201 });
    }, { scope: "global", store, lease: 30_000 });
    const warm = await handler(post("warm")); // Redis knows the scripts
    assert.equal(warm.status, 201);
    await warm.body?.cancel();

    server.pause();
    let first: Response;
    try {
      // The claim waits in the paused Redis; the key runs through
      // PostgreSQL and completes there.
      first = await handler(post("k"));
    } finally {
      server.resume();
    }
    assert.equal(first.status, 201);
    assert.equal(await first.text(), "run 2");
    // Redis runs the late claim now. The retry replays at once, and so
    // does every later one.
    for (let i = 0; i < 3; i++) {
      const retry = await handler(post("k"));
      assert.equal(retry.status, 201, `retry ${i}`);
      assert.equal(retry.headers.get("idempotent-replayed"), "true");
      assert.equal(await retry.text(), "run 2");
    }
    assert.equal(runs, 2);
    // The RedisStore undoes its late claim, so a retry finds Redis free and
    // copies the record there (no orphan left for the lease).
    const key = `idem:${await slotOf("k")}`;
    await waitFor("the record to be copied into Redis", async () => {
      const retry = await handler(post("k"));
      assert.equal(await retry.text(), "run 2");
      return (await redisRecordState(client!, key)) === "c";
    });
    assert.equal(runs, 2);
  },
);
