// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore on the real Redis of this machine, with node-redis and ioredis:
 * the conformance suite, one round trip per operation (counted with
 * MONITOR), SCRIPT FLUSH mid-run, poisoned values, and the `@db/redis`
 * adapter. Failures and deadlines are in `redis_failures_test.ts`, undoing
 * late claims in `redis_undo_test.ts`, lease floors and hints in
 * `redis_lease_test.ts`, peek, stats and forget of values of another type in
 * `redis_admin_test.ts`.
 *
 * node-redis and ioredis keep sockets and timers of their own (reconnect,
 * ping, offline queues) for a while after they close, so the tests that use
 * them turn the op and resource sanitizers off; the store's own timer is
 * checked with sanitizers on, on stub clients.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { Command, Redis } from "ioredis";
import {
  type RedisClientLike,
  type RedisCommander,
  RedisStore,
} from "../../src/stores/redis.ts";
import type { StoredResponse } from "../../src/store.ts";
import { storeConformance } from "../../src/testing/testing.ts";
import { REDIS_URL, testName, uniquePrefix } from "../_support/services.ts";
import { deleteRedisKeys, REDIS_POISONS } from "../_support/redis.ts";
import { Admin, clients, ignore, ioRedis, opts } from "./_redis_fixtures.ts";

const encoder = new TextEncoder();

for (const [label, make] of clients) {
  storeConformance({
    name: `RedisStore (${label})`,
    ignore,
    leaseMs: 200,
    async setup() {
      const { client, close } = await make();
      const admin = new Admin();
      const prefix = `${uniquePrefix(`conf_${label}`)}:`;
      const store = new RedisStore({ client, prefix });
      return {
        store,
        elapse: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
        poison: (slot, kind) => admin.poison(prefix + slot, kind),
        async teardown() {
          try {
            await deleteRedisKeys(prefix);
          } finally {
            close();
            admin.close();
          }
        },
      };
    },
  });
}

/**
 * Counts the commands one connection sends, with MONITOR on another: runs
 * `fn`, then an ECHO marker on the watched connection, and returns the
 * commands seen from its address in between.
 */
async function watch(
  client: RedisClientLike,
  address: string,
  fn: () => Promise<unknown>,
): Promise<string[]> {
  const seen: string[] = [];
  // A ready check (INFO) racing the MONITOR feed confuses ioredis.
  const base = new Redis(REDIS_URL, {
    enableReadyCheck: false,
    lazyConnect: true,
  });
  const monitor = await base.monitor();
  // A MONITOR line still arriving once disconnect() began is an ioredis
  // "Command queue state error" event, which unheard would throw.
  let stopping = false;
  monitor.on("error", (error: Error) => {
    if (!stopping) throw error;
  });
  try {
    const marker = `marker-${crypto.randomUUID()}`;
    let onMarker!: () => void;
    const markerSeen = new Promise<void>((resolve) => (onMarker = resolve));
    let open = false;
    const start = `start-${crypto.randomUUID()}`;
    monitor.on(
      "monitor",
      (_time: string, args: string[], source: string) => {
        if (source !== address) return;
        const name = String(args[0]).toLowerCase();
        if (name === "echo" && args[1] === start) open = true;
        else if (name === "echo" && args[1] === marker) onMarker();
        else if (open) seen.push(name);
      },
    );
    await send(client, ["ECHO", start]);
    await fn();
    await send(client, ["ECHO", marker]);
    await markerSeen;
    return seen;
  } finally {
    stopping = true;
    monitor.disconnect();
    base.disconnect();
  }
}

/** Sends a raw command on either client. */
function send(client: RedisClientLike, args: string[]): Promise<unknown> {
  const c = client as unknown as {
    sendCommand: (a: unknown) => Promise<unknown>;
  };
  // ioredis: a Command through sendCommand, which no auto-pipelining touches
  // (its callBuffer drops the command's name then: redis/ioredis#1923).
  return client instanceof Redis
    ? c.sendCommand(new Command(args[0]!, args.slice(1)))
    : c.sendCommand(args);
}

/** The client's own address, as MONITOR names it. */
async function addressOf(client: RedisClientLike): Promise<string> {
  const info = String(await send(client, ["CLIENT", "INFO"]));
  const match = /(?:^| )addr=(\S+)/.exec(info);
  assert.ok(match, info);
  return match[1]!;
}

for (const [label, make] of clients) {
  Deno.test({
    name: testName(
      `RedisStore (${label}) makes one round trip per operation (two for a claim in flight), and recovers from SCRIPT FLUSH`,
      ignore,
    ),
    ignore: ignore !== false,
    // The Redis clients keep sockets and timers past close().
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const { client, close } = await make();
      const admin = new Admin();
      const prefix = `${uniquePrefix(`rt_${label}`)}:`;
      const store = new RedisStore({ client, prefix });
      const address = await addressOf(client);
      const response: StoredResponse = {
        status: 201,
        headers: [["set-cookie", "a=1"]],
        body: new Uint8Array([0, 255, 1]),
      };
      try {
        // Make sure the scripts are loaded, so the counts below are the steady state.
        await store.release("warm", "x");
        const warm = await store.claim("warm", opts);
        if (warm.state === "acquired") {
          await store.extend("warm", warm.token, 1000);
          await store.complete("warm", warm.token, response);
        }

        await t.step(
          "a claim is one SET (and the claim script when in flight), each write one EVALSHA",
          async () => {
            let token = "";
            const cases: [string, () => Promise<unknown>][] = [
              ["claim (fresh)", async () => {
                const r = await store.claim("a", opts);
                assert.equal(r.state, "acquired");
                if (r.state === "acquired") token = r.token;
              }],
              ["claim (in flight)", async () => {
                assert.equal((await store.claim("a", opts)).state, "in_flight");
              }],
              ["extend", async () => {
                assert.equal(await store.extend("a", token, 5000), "applied");
              }],
              ["complete", async () => {
                assert.equal(
                  await store.complete("a", token, response),
                  "applied",
                );
              }],
              ["claim (replay, body included)", async () => {
                const r = await store.claim("a", opts);
                assert.equal(r.state, "completed");
                if (r.state === "completed") {
                  assert.deepEqual([...r.response.body!], [0, 255, 1]);
                }
              }],
              ["release (lost)", async () => {
                assert.equal(await store.release("a", token), "lost");
              }],
              ["release (applied)", async () => {
                const r = await store.claim("b", opts);
                assert.equal(r.state, "acquired");
                if (r.state === "acquired") {
                  assert.equal(await store.release("b", r.token), "applied");
                }
              }],
            ];
            const expected: Record<string, string[]> = {
              "claim (fresh)": ["set"],
              "claim (in flight)": ["set", "evalsha"],
              "claim (replay, body included)": ["set"],
              "release (applied)": ["set", "evalsha"],
            };
            for (const [name, fn] of cases) {
              const seen = await watch(client, address, fn);
              assert.deepEqual(seen, expected[name] ?? ["evalsha"], name);
            }
          },
        );

        await t.step(
          "after SCRIPT FLUSH an operation falls back to EVAL once, and works",
          async () => {
            const r = await store.claim("flush", opts);
            assert.equal(r.state, "acquired");
            if (r.state !== "acquired") return;
            await admin.client.script("FLUSH");
            const seen = await watch(client, address, async () => {
              assert.equal(
                await store.complete("flush", r.token, response),
                "applied",
              );
            });
            assert.deepEqual(seen, ["evalsha", "eval"]);
            // Each script is reloaded on its own first use; a replay needs none.
            await admin.client.script("FLUSH");
            assert.deepEqual(
              await watch(client, address, async () => {
                const replay = await store.claim("flush", opts);
                assert.equal(replay.state, "completed");
              }),
              ["set"],
            );
            assert.equal((await store.claim("flush2", opts)).state, "acquired");
            assert.deepEqual(
              await watch(client, address, async () => {
                const again = await store.claim("flush2", opts);
                assert.equal(again.state, "in_flight");
              }),
              ["set", "evalsha", "eval"],
            );
          },
        );

        await t.step(
          "the key carries the TTL of the first claim; complete keeps it",
          async () => {
            const r = await store.claim("ttl", { ...opts, ttlMs: 30_000 });
            assert.equal(r.state, "acquired");
            if (r.state !== "acquired") return;
            const before = await admin.client.pttl(`${prefix}ttl`);
            assert.ok(before > 29_000 && before <= 30_000, `${before}`);
            await new Promise((resolve) => setTimeout(resolve, 50));
            await store.extend("ttl", r.token, 10_000);
            await store.complete("ttl", r.token, response);
            const after = await admin.client.pttl(`${prefix}ttl`);
            assert.ok(after < before - 40 && after > 0, `${before} ${after}`);
            assert.equal(await admin.client.type(`${prefix}ttl`), "string");
          },
        );
      } finally {
        await deleteRedisKeys(prefix);
        close();
        admin.close();
      }
    },
  });
}

const POISONS = REDIS_POISONS;

for (const [label, make] of clients) {
  Deno.test({
    name: testName(
      `RedisStore (${label}) reads poisoned values of every kind as in flight and never changes them or their expiry`,
      ignore,
    ),
    ignore: ignore !== false,
    // The Redis clients keep sockets and timers past close().
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const { client, close } = await make();
      const admin = new Admin();
      const prefix = `${uniquePrefix(`poison_${label}`)}:`;
      const store = new RedisStore({ client, prefix });
      try {
        for (const kind of POISONS) {
          const key = `${prefix}${kind}`;
          await admin.poison(key, kind);
          const before = await admin.client.dump(key);
          const ttl = await admin.client.pttl(key);
          const seen = await store.claim(kind, { ...opts, leaseMs: 300 });
          assert.deepEqual(
            { ...seen, retryAfterMs: 0 },
            { state: "in_flight", fingerprint: null, retryAfterMs: 0 },
            kind,
          );
          if (seen.state === "in_flight") {
            assert.ok(
              seen.retryAfterMs >= 1 && seen.retryAfterMs <= 300,
              `${kind}: ${seen.retryAfterMs}`,
            );
          }
          // A token long enough to carry a fingerprint, so the scripts run.
          const t = "t".repeat(40);
          assert.equal(await store.extend(kind, t, 1000), "lost", kind);
          assert.equal(
            await store.complete(kind, t, {
              status: 200,
              headers: [],
              body: new Uint8Array(1),
            }),
            "lost",
            kind,
          );
          assert.equal(await store.release(kind, t), "lost", kind);
          assert.deepEqual(await admin.client.dump(key), before, kind);
          // The expiry too: complete puts back a value that was not ours.
          const left = await admin.client.pttl(key);
          assert.ok(left > 0 && left <= ttl, `${kind}: ${ttl} then ${left}`);
        }
      } finally {
        await deleteRedisKeys(prefix);
        close();
        admin.close();
      }
    },
  });
}

/** The shape of `@db/redis`'s `Redis.sendCommand`, without importing it. */
interface DbRedisLike {
  sendCommand(
    command: string,
    args?: (string | number | Uint8Array)[],
    options?: { returnUint8Arrays?: boolean },
  ): Promise<unknown>;
}

/** The README's adapter for `@db/redis`. */
function fromDbRedis(redis: DbRedisLike): RedisCommander {
  return {
    sendCommand: ([command, ...args]) =>
      redis.sendCommand(command as string, args, { returnUint8Arrays: true }),
  };
}

Deno.test({
  name: testName(
    "RedisStore works through the @db/redis adapter (a stand-in on ioredis)",
    ignore,
  ),
  ignore: ignore !== false,
  // ioredis keeps its socket's handles past disconnect().
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const io = ioRedis();
    const admin = new Admin();
    const prefix = `${uniquePrefix("dbredis")}:`;
    // A stand-in with @db/redis's signature; errors come as "-CODE message".
    const db: DbRedisLike = {
      async sendCommand(command, args = [], options) {
        assert.equal(options?.returnUint8Arrays, true);
        try {
          return await io.callBuffer(
            command,
            ...args.map((a) =>
              a instanceof Uint8Array
                ? Buffer.from(a.buffer, a.byteOffset, a.byteLength)
                : a
            ),
          );
        } catch (error) {
          throw new Error(`-${(error as Error).message}`);
        }
      },
    };
    const store = new RedisStore({ client: fromDbRedis(db), prefix });
    try {
      await admin.client.script("FLUSH");
      const r = await store.claim("s", opts);
      assert.equal(r.state, "acquired");
      if (r.state !== "acquired") return;
      const body = encoder.encode("héllo");
      assert.equal(
        await store.complete("s", r.token, { status: 200, headers: [], body }),
        "applied",
      );
      const replay = await store.claim("s", opts);
      assert.equal(replay.state, "completed");
      if (replay.state === "completed") {
        assert.deepEqual(replay.response.body, body);
      }
    } finally {
      await deleteRedisKeys(prefix);
      io.disconnect();
      admin.close();
    }
  },
});

for (const [label, make] of clients) {
  Deno.test({
    name: testName(
      `RedisStore (${label}) completes only under its whole token: one cut short, run long or of another claim is lost and changes nothing`,
      ignore,
    ),
    ignore: ignore !== false,
    // The Redis clients keep sockets and timers past close().
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const { client, close } = await make();
      const admin = new Admin();
      const prefix = `${uniquePrefix(`whole_${label}`)}:`;
      const store = new RedisStore({ client, prefix });
      const response: StoredResponse = {
        status: 200,
        headers: [],
        body: encoder.encode("ok"),
      };
      try {
        const claim = await store.claim("s", opts);
        assert.equal(claim.state, "acquired");
        if (claim.state !== "acquired") return;
        const before = await admin.client.get(`${prefix}s`);
        // Cut short, run long, and another claim's id of the same length.
        const other = `${"0".repeat(36)}${claim.token.slice(36)}`;
        for (
          const token of [claim.token.slice(0, -1), `${claim.token}0`, other]
        ) {
          assert.equal(await store.complete("s", token, response), "lost");
          assert.equal(await admin.client.get(`${prefix}s`), before);
        }
        assert.equal(
          await store.complete("s", claim.token, response),
          "applied",
        );
      } finally {
        await deleteRedisKeys(prefix);
        close();
        admin.close();
      }
    },
  });
}
