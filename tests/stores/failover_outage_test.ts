// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * FailoverStore through real outages: with a redis-server that the test
 * starts, kills and restarts on its own port, an outage and a recovery
 * driven through the middleware, a split brain between two instances that
 * disagree on whether Redis is up, `strict` mode with PostgreSQL
 * unreachable, a slow handler's lease across a restart, and a claim that
 * lands late on a paused Redis.
 *
 * node-redis and postgres.js keep sockets and timers of their own for a while
 * after they close, so the integration tests turn the op and resource
 * sanitizers off (as the Redis and PostgreSQL store tests do).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency } from "../../src/idempotency.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import {
  type FailoverEvent,
  FailoverStore,
} from "../../src/stores/failover.ts";
import { type IdempotencyStore, StoreError } from "../../src/store.ts";
import {
  DATABASE_URL,
  integrationTest,
  type PrivateRedis,
  REDIS_URL,
  startRedisServer,
  uniquePrefix,
} from "../_support/services.ts";
import { deleteRedisKeys, redisRecordState } from "../_support/redis.ts";
import { sleep, waitFor } from "../_support/time.ts";
import { freePort, post } from "../_support/http.ts";
import {
  type NodeRedis,
  nodeRedis,
  ok,
  opts,
  pg,
  pgFallback,
  SERVICES_IGNORE,
  token,
} from "./_failover_fixtures.ts";

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

function integration(name: string, fn: () => Promise<void>): void {
  integrationTest(name, SERVICES_IGNORE, fn);
}

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
