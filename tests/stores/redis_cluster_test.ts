// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore on a private Redis Cluster (3 masters, 3 replicas; see
 * tests/_support/cluster.ts), with node-redis `createCluster` and ioredis `Cluster`:
 *
 * - the store conformance suite, on each client;
 * - scripts the masters do not know (SCRIPT FLUSH on every master) are
 *   loaded again by the EVAL fallback, on each client;
 * - two app processes (tests/_support/cluster_app.ts, one per client) under a load
 *   of many keys times duplicates while slots migrate between masters
 *   (MOVED/ASK), while a replica takes over with CLUSTER FAILOVER, and
 *   while a master is killed so its replica is promoted; with and without
 *   the `waitReplicas` option. Executions are counted by the test's own
 *   ledger server, never by the library.
 *
 * The failovers (CLUSTER FAILOVER, a killed master) are in
 * `redis_cluster_failover_test.ts`; what both share in
 * `_redis_cluster_fixtures.ts`.
 *
 * Each test starts its own cluster and stops it in `finally`. Every wait is
 * for a state (cluster_state:ok, slot owners, a replica's role), never for a
 * duration.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createCluster } from "redis";
import type { Cluster } from "ioredis";
import { RedisStore } from "../../src/stores/redis.ts";
import {
  type PoisonKind,
  storeConformance,
} from "../../src/testing/testing.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import { type PrivateCluster, startCluster } from "../_support/cluster.ts";
import { uniquePrefix } from "../_support/services.ts";
import { REDIS_STRING_POISONS } from "../_support/redis.ts";
import { report, tally } from "../faults/_load.ts";
import {
  Apps,
  claimAndComplete,
  clusterTest,
  ignore,
  ioCluster,
  ioRedisCluster,
  LedgerServer,
  loadDuring,
  type Opened,
  opts,
  redirections,
  verdict,
  waitReady,
} from "./_redis_cluster_fixtures.ts";

/**
 * The node timeout of clusters in which no node is killed: long enough that a
 * node slowed by a loaded machine is never marked failing (which answers
 * CLUSTERDOWN mid-test); the kill tests keep the short default, so that a
 * dead master fails over quickly.
 */
const CALM_NODE_TIMEOUT_MS = 15_000;

type Maker = (cluster: PrivateCluster) => Promise<Opened>;

async function nodeRedisCluster(cluster: PrivateCluster): Promise<Opened> {
  const client = createCluster({
    rootNodes: cluster.rootNodes.map(({ host, port }) => ({
      url: `redis://${host}:${port}`,
    })),
  });
  client.on("error", () => {});
  await client.connect();
  return { client, close: () => client.destroy() };
}

const clients: [string, Maker][] = [
  ["node-redis createCluster", nodeRedisCluster],
  ["ioredis Cluster", ioRedisCluster],
];

/** Plants a value that is not a record of ours, through a cluster client. */
async function poison(admin: Cluster, key: string, kind: PoisonKind) {
  await admin.del(key);
  await admin.set(
    key,
    kind === "garbage"
      ? Buffer.from(crypto.getRandomValues(new Uint8Array(64)))
      : REDIS_STRING_POISONS[kind]!,
  );
}

for (const [label, make] of clients) {
  storeConformance({
    name: `RedisStore (${label}, 3 masters + 3 replicas)`,
    ...(ignore ? { ignore } : {}),
    leaseMs: 300,
    async setup() {
      const cluster = await startCluster({
        nodeTimeoutMs: CALM_NODE_TIMEOUT_MS,
      });
      try {
        const { client, close } = await make(cluster);
        const admin = ioCluster(cluster);
        await waitReady(admin);
        const prefix = `${uniquePrefix("cluster_conf")}:`;
        const redis = new RedisStore({ client, prefix });
        // stats() refuses a cluster (a SCAN sees one node): the suite runs
        // without it, and shows its case skipped.
        await assert.rejects(redis.stats(), TypeError);
        const store: IdempotencyStore = {
          claim: (slot, options) => redis.claim(slot, options),
          complete: (slot, token, r) => redis.complete(slot, token, r),
          release: (slot, token) => redis.release(slot, token),
          extend: (slot, token, ms) => redis.extend(slot, token, ms),
          peek: (slot) => redis.peek(slot),
          forget: (slot) => redis.forget(slot),
        };
        return {
          store,
          elapse: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
          poison: (slot, kind) => poison(admin, prefix + slot, kind),
          async teardown() {
            try {
              await close();
              admin.disconnect();
            } finally {
              await cluster.stop();
            }
          },
        };
      } catch (error) {
        await cluster.stop();
        throw error;
      }
    },
  });
}

// --- many keys, two processes, topology changes mid-load ----------------------

async function flushScripts(cluster: PrivateCluster): Promise<void> {
  for (const { master } of await cluster.pairs()) {
    await cluster.cli(master.port, "SCRIPT", "FLUSH");
  }
}

clusterTest(
  "RedisStore on a cluster: slots migrate mid-load (MOVED/ASK followed), scripts reload after SCRIPT FLUSH, no key runs twice",
  async (t) => {
    const cluster = await startCluster({ nodeTimeoutMs: CALM_NODE_TIMEOUT_MS });
    const ledgerServer = new LedgerServer();
    const prefix = `${uniquePrefix("cluster_reshard")}:`;
    const apps = new Apps(cluster, ledgerServer, prefix, 0);
    try {
      await t.step(
        "after SCRIPT FLUSH on every master, each client reloads the scripts",
        async () => {
          for (const [label, make] of clients) {
            const { client, close } = await make(cluster);
            try {
              const store = new RedisStore({ client, prefix });
              // Slots on every master.
              const slots = Array.from(
                { length: 12 },
                (_, i) => `flush-${label}-${i}`,
              );
              await flushScripts(cluster);
              for (const slot of slots) {
                await claimAndComplete(
                  store,
                  slot,
                  new Uint8Array([0, 255, 7]),
                  () => flushScripts(cluster),
                );
                const replay = await store.claim(slot, opts);
                assert.equal(replay.state, "completed");
              }
            } finally {
              await close();
            }
          }
        },
      );

      await apps.ready();
      const { ledger } = ledgerServer;
      const seen = tally();
      const [from, to] = await cluster.pairs();
      const moving = 1500;
      await flushScripts(cluster);
      await cluster.ready();
      const keys = await loadDuring(
        apps.send,
        ledger,
        seen,
        "reshard",
        () =>
          cluster.cli(
            from!.master.port,
            "--cluster",
            "reshard",
            `127.0.0.1:${from!.master.port}`,
            "--cluster-from",
            from!.master.id,
            "--cluster-to",
            to!.master.id,
            "--cluster-slots",
            String(moving),
            "--cluster-yes",
          ).then(() => cluster.ready()),
      );
      // The slots moved: the target serves `moving` more.
      const after = (await cluster.pairs()).find((p) =>
        p.master.id === to!.master.id
      )!;
      const count = (ranges: [number, number][]) =>
        ranges.reduce((n, [a, b]) => n + b - a + 1, 0);
      assert.equal(count(after.master.slots), count(to!.master.slots) + moving);
      const result = await verdict(apps, ledger, keys, seen);
      const redirected = await redirections(cluster);
      report("cluster reshard", {
        keys: keys.length,
        requests: seen.requests,
        slotsMoved: moving,
        executions: ledger.total,
        duplicates: result.duplicates,
        redirected,
        altered: seen.altered.length,
        stuck: result.stuck.length,
        statuses: seen.statuses,
      });
      assert.deepEqual(result.dupKeys, [], "keys that ran twice");
      assert.deepEqual(seen.altered, [], "altered answers");
      assert.deepEqual(result.stuck, [], "keys that never replay");
      assert.ok(redirected.moved > 0, "no MOVED was answered");
    } finally {
      await apps.kill();
      await ledgerServer.server.shutdown();
      await cluster.stop();
    }
  },
);
