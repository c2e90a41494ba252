// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's `waitReplicas` option on stub clients (no server needed):
 * when it sends `WAIT`, what a shortfall does (throws, and undoes a claim by
 * its token), where a cluster client routes it, and its validation. The
 * option on a real cluster is in tests/redis_cluster_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type RedisClientLike,
  type RedisCommander,
  RedisStore,
} from "../src/stores/redis.ts";
import { StoreError } from "../src/store.ts";
import { until } from "./_helpers.ts";

const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };

/** A stub whose claim and complete scripts answer `script`, WAIT `count`. */
function stub(script: unknown, count: unknown) {
  const sent: string[][] = [];
  const client: RedisCommander = {
    sendCommand(args) {
      sent.push(args.map(String));
      if (args[0] === "WAIT") return Promise.resolve(count);
      // A release (EVALSHA sha 1 key token) answers applied.
      return Promise.resolve(args.length === 5 ? 1 : script);
    },
  };
  return { client, sent };
}

const response = { status: 201, headers: [], body: new Uint8Array([1]) };

Deno.test("RedisStore with waitReplicas sends WAIT after a claim that acquires and a completion that applies, and only then", async () => {
  const ok = stub(1, 1);
  const store = new RedisStore({
    client: ok.client,
    waitReplicas: 1,
    waitTimeoutMs: 250,
  });
  const claim = await store.claim("s", opts);
  assert.equal(claim.state, "acquired");
  assert.equal(await store.complete("s", "t", response), "applied");
  assert.deepEqual(ok.sent.map((a) => a[0]), [
    "EVALSHA",
    "WAIT",
    "EVALSHA",
    "WAIT",
  ]);
  assert.deepEqual(ok.sent[1], ["WAIT", "1", "250"]);
  // Nothing written: no WAIT.
  const lost = stub(0, 1);
  const quiet = new RedisStore({ client: lost.client, waitReplicas: 2 });
  assert.equal(await quiet.complete("s", "t", response), "lost");
  const busy = stub([0, "fp", 100], 1);
  const seen = new RedisStore({ client: busy.client, waitReplicas: 2 });
  assert.equal((await seen.claim("s", opts)).state, "in_flight");
  assert.deepEqual([...lost.sent, ...busy.sent].map((a) => a[0]), [
    "EVALSHA",
    "EVALSHA",
  ]);
  // Off by default.
  const off = stub(1, 1);
  await new RedisStore({ client: off.client }).claim("s", opts);
  assert.deepEqual(off.sent.map((a) => a[0]), ["EVALSHA"]);
});

Deno.test("RedisStore with waitReplicas throws when too few replicas acknowledge, and undoes such a claim by its token", async () => {
  const short = stub(1, 0);
  const store = new RedisStore({ client: short.client, waitReplicas: 1 });
  const error = await store.claim("s", opts).catch((e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal(error.operation, "claim");
  assert.match(error.message, /acknowledged by 0 of 1 replicas/);
  const token = short.sent[0]![5]; // EVALSHA sha 1 key fp TOKEN lease ttl
  await until(() => short.sent.length === 3, "the undo");
  assert.deepEqual(short.sent[2]!.slice(0, 1), ["EVALSHA"]);
  assert.equal(short.sent[2]![4], token);
  await assert.rejects(() => store.complete("s", "t", response), StoreError);
});

Deno.test("RedisStore routes WAIT to the key's master on node-redis and ioredis clusters", async () => {
  const nodeRedisSent: unknown[][] = [];
  const nodeRedisCluster = {
    getSlotMaster: () => ({}),
    withTypeMapping: () => nodeRedisCluster,
    sendCommand(...args: unknown[]) {
      nodeRedisSent.push(args);
      const command = args[2] as string[];
      return Promise.resolve(command[0] === "WAIT" ? 1 : 1);
    },
  };
  await new RedisStore({
    client: nodeRedisCluster as unknown as RedisClientLike,
    prefix: "p:",
    waitReplicas: 1,
  }).claim("s", opts);
  assert.deepEqual(nodeRedisSent[1]!.slice(0, 3), [
    "p:s",
    false,
    ["WAIT", "1", "500"],
  ]);
  const piped: string[][][] = [];
  const ioRedisCluster = {
    isCluster: true,
    callBuffer: () => Promise.resolve(1),
    pipeline(commands: string[][]) {
      piped.push(commands);
      return { exec: () => Promise.resolve([[null, 0], [null, 1]]) };
    },
  };
  await new RedisStore({
    client: ioRedisCluster as unknown as RedisClientLike,
    prefix: "p:",
    waitReplicas: 1,
  }).claim("s", opts);
  assert.deepEqual(piped, [[["exists", "p:s"], ["wait", "1", "500"]]]);
});

Deno.test("RedisStore validates waitReplicas and waitTimeoutMs", () => {
  const client: RedisCommander = { sendCommand: () => Promise.resolve(0) };
  for (const waitReplicas of [-1, 1.5, Number.NaN]) {
    assert.throws(() => new RedisStore({ client, waitReplicas }), RangeError);
  }
  assert.throws(
    () => new RedisStore({ client, waitReplicas: 1, waitTimeoutMs: 0 }),
    RangeError,
  );
  new RedisStore({ client, waitReplicas: 0 });
});
