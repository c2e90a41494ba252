// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's `waitReplicas` option on stub clients (no server needed):
 * when it sends `WAIT`, what a shortfall does (throws, and undoes a claim by
 * its token), where a cluster client routes it, and its validation. The
 * option on a real cluster, under a failover, is in
 * tests/stores/redis_cluster_failover_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type RedisClientLike,
  type RedisCommander,
  RedisStore,
} from "../../src/stores/redis.ts";
import { StoreError } from "../../src/store.ts";
import { until } from "../_support/time.ts";
import { SCRIPTS } from "../../src/stores/_redis_scripts.ts";

const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };

/**
 * A stub whose native claim (`SET … NX PX ttl GET`) answers `set`, whose
 * claim and complete scripts answer `script`, and WAIT `count`; a release
 * answers applied.
 */
function stub(set: unknown, count: unknown, script: unknown = 1) {
  const sent: string[][] = [];
  const client: RedisCommander = {
    sendCommand(args) {
      sent.push(args.map(String));
      if (args[0] === "WAIT") return Promise.resolve(count);
      if (args[0] === "SET") return Promise.resolve(set);
      return Promise.resolve(args[1] === SCRIPTS.release.sha ? 1 : script);
    },
  };
  return { client, sent };
}

const response = { status: 201, headers: [], body: new Uint8Array([1]) };
/** A token of the store's shape: 36 characters of id, then the fingerprint. */
const token = `${"0".repeat(36)}fp`;
/** Someone else's claim in flight, as a native claim's reply finds it. */
const inFlight = `idem2f55000:${"1".repeat(36)}fp`;

Deno.test("RedisStore with waitReplicas sends WAIT after a claim that acquires and a completion that applies, and only then", async () => {
  const ok = stub(null, 1);
  const store = new RedisStore({
    client: ok.client,
    waitReplicas: 1,
    waitTimeoutMs: 250,
  });
  const claim = await store.claim("s", opts);
  assert.equal(claim.state, "acquired");
  assert.equal(await store.complete("s", token, response), "applied");
  assert.deepEqual(ok.sent.map((a) => a[0]), [
    "SET",
    "WAIT",
    "EVALSHA",
    "WAIT",
  ]);
  assert.deepEqual(ok.sent[1], ["WAIT", "1", "250"]);
  // Nothing written: no WAIT.
  const lost = stub(null, 1, 0);
  const quiet = new RedisStore({ client: lost.client, waitReplicas: 2 });
  assert.equal(await quiet.complete("s", token, response), "lost");
  const busy = stub(inFlight, 1, [0, "fp", 100]);
  const seen = new RedisStore({ client: busy.client, waitReplicas: 2 });
  assert.equal((await seen.claim("s", opts)).state, "in_flight");
  assert.deepEqual([...lost.sent, ...busy.sent].map((a) => a[0]), [
    "EVALSHA",
    "SET",
    "EVALSHA",
  ]);
  // A takeover by the claim script is a write: WAIT.
  const taken = stub(inFlight, 1, 2);
  const after = new RedisStore({ client: taken.client, waitReplicas: 1 });
  assert.equal((await after.claim("s", opts)).state, "acquired");
  assert.deepEqual(taken.sent.map((a) => a[0]), ["SET", "EVALSHA", "WAIT"]);
  // Off by default.
  const off = stub(null, 1);
  await new RedisStore({ client: off.client }).claim("s", opts);
  assert.deepEqual(off.sent.map((a) => a[0]), ["SET"]);
});

Deno.test("RedisStore with waitReplicas throws when too few replicas acknowledge, and undoes such a claim by its token", async () => {
  const short = stub(null, 0);
  const store = new RedisStore({ client: short.client, waitReplicas: 1 });
  const error = await store.claim("s", opts).catch((e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal(error.operation, "claim");
  assert.match(error.message, /acknowledged by 0 of 1 replicas/);
  // SET key <record> NX PX ttl GET, the record ending in the claim's token.
  const record = short.sent[0]![2]!;
  const claimed = record.slice(record.indexOf(":") + 1);
  await until(() => short.sent.length === 3, "the undo");
  assert.deepEqual(short.sent[2]!.slice(0, 2), [
    "EVALSHA",
    SCRIPTS.release.sha,
  ]);
  assert.equal(short.sent[2]![4], claimed);
  await assert.rejects(() => store.complete("s", token, response), StoreError);
});

Deno.test("RedisStore routes WAIT to the key's master on node-redis and ioredis clusters", async () => {
  const nodeRedisSent: unknown[][] = [];
  const nodeRedisCluster = {
    getSlotMaster: () => ({}),
    withTypeMapping: () => nodeRedisCluster,
    sendCommand(...args: unknown[]) {
      nodeRedisSent.push(args);
      const command = args[2] as string[];
      return Promise.resolve(command[0] === "SET" ? null : 1);
    },
  };
  await new RedisStore({
    client: nodeRedisCluster as unknown as RedisClientLike,
    prefix: "p:",
    waitReplicas: 1,
  }).claim("s", opts);
  // The claim goes to the key's slot too: SET has its key first.
  assert.deepEqual(nodeRedisSent[0]!.slice(0, 2), ["p:s", false]);
  assert.deepEqual(nodeRedisSent[1]!.slice(0, 3), [
    "p:s",
    false,
    ["WAIT", "1", "500"],
  ]);
  const piped: string[][][] = [];
  const ioRedisCluster = {
    isCluster: true,
    callBuffer: (command: string) =>
      Promise.resolve(command === "SET" ? null : 1),
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
