// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore on a private Redis Cluster while a replica takes over: two app
 * processes under load while CLUSTER FAILOVER runs and while a master is
 * killed so its replica is promoted, without and with `waitReplicas`
 * (duplicates measured; none with WAIT), and what WAIT costs. The rest of
 * the cluster tests are in `redis_cluster_test.ts`.
 *
 * Each test starts its own cluster and stops it in `finally`. Every wait is
 * for a state, never for a duration.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RedisStore } from "../../src/stores/redis.ts";
import {
  type NodeInfo,
  type PrivateCluster,
  startCluster,
  waitUntil,
} from "../_support/cluster.ts";
import { uniquePrefix } from "../_support/services.ts";
import {
  type Ledger,
  load,
  pool,
  report,
  type Tally,
  tally,
} from "../faults/_load.ts";
import {
  Apps,
  claimAndComplete,
  clusterTest,
  ioRedisCluster,
  LedgerServer,
  loadDuring,
  redirections,
  verdict,
} from "./_redis_cluster_fixtures.ts";

/** Waits until the node on `port` is a master and the cluster is ok again. */
async function promoted(
  cluster: PrivateCluster,
  port: number,
  replicas: boolean,
): Promise<void> {
  await waitUntil(`the node on ${port} to become a master`, async () => {
    const info = await cluster.cli(port, "INFO", "replication").catch(() => "");
    return info.includes("role:master");
  });
  await cluster.ready(replicas);
}

/**
 * The same fault-free load (fresh keys, each sent once) through the plain
 * apps and the apps with `waitReplicas: 1`, twice each, alternated: the
 * elapsed time of the WAIT path over the plain one.
 */
async function waitCost(
  plain: Apps,
  waited: Apps,
  ledger: Ledger,
): Promise<number> {
  const elapsed = { plain: 0, wait: 0 };
  // A warm-up round each (not counted), then three each, alternated.
  for (let round = 0; round < 8; round++) {
    const [apps, label] = round % 2 === 0
      ? [plain, "plain" as const]
      : [waited, "wait" as const];
    const keys = Array.from({ length: 200 }, (_, i) => `cost-${round}-${i}`);
    const seen = tally();
    const started = performance.now();
    await load(
      apps.send,
      ledger,
      { keys, duplicates: 1, concurrency: 16 },
      seen,
    );
    if (round >= 2) elapsed[label] += performance.now() - started;
    assert.equal(seen.statuses["201"], keys.length, JSON.stringify(seen));
  }
  return elapsed.wait / elapsed.plain;
}

/**
 * The store alone, in this process (ioredis Cluster): fresh slots claimed
 * and completed, 16 at a time, without and with `waitReplicas: 1`,
 * alternated after a warm-up round each: the WAIT path's elapsed time over
 * the plain one.
 */
async function storeWaitCost(cluster: PrivateCluster): Promise<number> {
  const { client, close } = await ioRedisCluster(cluster);
  try {
    const prefix = `${uniquePrefix("cluster_cost")}:`;
    const stores = {
      plain: new RedisStore({ client, prefix }),
      wait: new RedisStore({ client, prefix, waitReplicas: 1 }),
    };
    const elapsed = { plain: 0, wait: 0 };
    const body = new Uint8Array(64);
    for (let round = 0; round < 8; round++) {
      const label = round % 2 === 0 ? "plain" : "wait";
      const store = stores[label];
      const slots = Array.from({ length: 300 }, (_, i) => `${round}-${i}`);
      const started = performance.now();
      await pool(slots, 16, (slot) => claimAndComplete(store, slot, body));
      if (round >= 2) elapsed[label] += performance.now() - started;
    }
    return elapsed.wait / elapsed.plain;
  } finally {
    await close();
  }
}

/**
 * A private cluster, the ledger server and two pairs of app processes on it
 * (keys under a prefix made from `name`), without and with `waitReplicas: 1`,
 * ready for `run`; `phases` lists the pairs with their index and label. All
 * are stopped after, even on failure.
 */
async function withAppPairs<T>(
  name: string,
  run: (setup: {
    cluster: PrivateCluster;
    ledger: Ledger;
    plain: Apps;
    waited: Apps;
    phases:
      readonly (readonly [0, "plain", Apps] | readonly [1, "wait", Apps])[];
  }) => Promise<T>,
): Promise<T> {
  const cluster = await startCluster();
  const ledgerServer = new LedgerServer();
  const prefix = `${uniquePrefix(name)}:`;
  const plain = new Apps(cluster, ledgerServer, prefix, 0);
  const waited = new Apps(cluster, ledgerServer, prefix, 1);
  try {
    await Promise.all([plain.ready(), waited.ready()]);
    return await run({
      cluster,
      ledger: ledgerServer.ledger,
      plain,
      waited,
      phases: [[0, "plain", plain], [1, "wait", waited]] as const,
    });
  } finally {
    await plain.kill();
    await waited.kill();
    await ledgerServer.server.shutdown();
    await cluster.stop();
  }
}

/**
 * A phase's verdict, asserted (no altered answer, no key that never
 * replays), and its figures.
 */
function harmless(
  label: string,
  seen: Tally,
  result: { stuck: string[] },
): { altered: number; stuck: number; statuses: Tally["statuses"] } {
  assert.deepEqual(seen.altered, [], `${label}: altered answers`);
  assert.deepEqual(result.stuck, [], `${label}: keys that never replay`);
  return {
    altered: seen.altered.length,
    stuck: result.stuck.length,
    statuses: seen.statuses,
  };
}

type Fault = (
  cluster: PrivateCluster,
  pair: { master: NodeInfo; replica: NodeInfo },
) => Promise<void>;

/**
 * Two pairs of app processes, without and with `waitReplicas: 1`, each
 * under load while `fault` strikes a master of its own; every key settles
 * into a replay after. Answers the duplicates per phase.
 */
async function failoverUnderLoad(
  name: string,
  fault: Fault,
  recover?: Fault,
): Promise<{ plain: number; wait: number }> {
  return await withAppPairs("cluster_failover", async (
    { cluster, ledger, plain, waited, phases },
  ) => {
    const ratio = await waitCost(plain, waited, ledger);
    const pairs = await cluster.pairs();
    const storeRatio = await storeWaitCost(cluster);
    const figures: Record<string, unknown> = {
      waitCost: {
        overHttp: Number(ratio.toFixed(2)),
        storeAlone: Number(storeRatio.toFixed(2)),
      },
    };
    const dups = { plain: 0, wait: 0 };
    for (const [i, label, apps] of phases) {
      const seen = tally();
      const before = await redirections(cluster);
      const keys = await loadDuring(
        apps.send,
        ledger,
        seen,
        `${label}`,
        () => fault(cluster, pairs[i]!),
      );
      await recover?.(cluster, pairs[i]!);
      const result = await verdict(apps, ledger, keys, seen);
      const after = await redirections(cluster);
      dups[label] = result.duplicates;
      figures[label] = {
        keys: keys.length,
        requests: seen.requests,
        duplicates: result.duplicates,
        dupKeys: result.dupKeys.slice(0, 5),
        movedAfterFailover: after.moved - before.moved,
        ...harmless(label, seen, result),
      };
    }
    report(name, figures);
    return dups;
  });
}

clusterTest(
  "RedisStore on a cluster: CLUSTER FAILOVER mid-load, without and with waitReplicas (duplicates measured; none with WAIT)",
  async () => {
    const dups = await failoverUnderLoad(
      "cluster CLUSTER FAILOVER",
      async (cluster, { replica }) => {
        await cluster.cli(replica.port, "CLUSTER", "FAILOVER");
        // The old master turns into its replica.
        await promoted(cluster, replica.port, true);
      },
    );
    assert.equal(dups.wait, 0, "keys that ran twice with waitReplicas: 1");
  },
);

clusterTest(
  "RedisStore on a cluster: a master killed mid-load, its replica promoted, without and with waitReplicas (duplicates measured)",
  async () => {
    const dups = await failoverUnderLoad(
      "cluster master killed",
      async (cluster, { master, replica }) => {
        await cluster.kill(master.port);
        await promoted(cluster, replica.port, false);
      },
      // After the load, the killed node comes back as the new master's
      // replica (until then, with WAIT, that master's keys answer 503).
      (cluster, { master }) => rejoin(cluster, master.port),
    );
    assert.equal(dups.wait, 0, "keys that ran twice with waitReplicas: 1");
  },
);

/** Restarts a killed node and waits until it is a synced replica again. */
async function rejoin(cluster: PrivateCluster, port: number): Promise<void> {
  cluster.spawn(cluster.nodes.find((n) => n.port === port)!);
  await waitUntil(`the node on ${port} to rejoin as a replica`, async () => {
    const info = await cluster.cli(port, "INFO", "replication")
      .catch(() => "");
    return info.includes("role:slave") &&
      info.includes("master_link_status:up");
  });
  await cluster.ready(true);
}

clusterTest(
  "RedisStore on a cluster: writes acknowledged by a master whose replica lags are lost when it dies; waitReplicas: 1 loses none",
  async () => {
    await withAppPairs("cluster_lag", async ({ cluster, ledger, phases }) => {
      const pairs = await cluster.pairs();
      const figures: Record<string, unknown> = {};
      const dups = { plain: 0, wait: 0 };
      for (const [i, label, apps] of phases) {
        const { master, replica } = pairs[i]!;
        const replicaNode = cluster.nodes.find((n) => n.port === replica.port)!;
        // The replica stops receiving: frozen, and its link cut by the
        // master (so nothing written from now on waits in its socket).
        replicaNode.child!.kill("SIGSTOP");
        await cluster.cli(master.port, "CLIENT", "KILL", "TYPE", "replica");
        const seen = tally();
        const keys = Array.from({ length: 60 }, (_, k) => `lag-${label}-${k}`);
        await load(
          apps.send,
          ledger,
          { keys, duplicates: 1, concurrency: 16 },
          seen,
        );
        const ranBefore = keys.filter((k) => ledger.of(k).length > 0).length;
        // The master dies; the replica, without those writes, takes over.
        await cluster.kill(master.port);
        replicaNode.child!.kill("SIGCONT");
        await cluster.cli(replica.port, "CLUSTER", "FAILOVER", "TAKEOVER")
          .catch(() => {}); // it may have been elected already
        await promoted(cluster, replica.port, false);
        // Back to a replica per master (WAIT needs one to answer).
        await rejoin(cluster, master.port);
        const result = await verdict(apps, ledger, keys, seen);
        dups[label] = result.duplicates;
        figures[label] = {
          keys: keys.length,
          ranBeforeTheFailover: ranBefore,
          duplicates: result.duplicates,
          ...harmless(label, seen, result),
        };
      }
      report("cluster replica lagging, then master killed", figures);
      // Without WAIT, the keys the dead master alone held ran again.
      assert.ok(dups.plain > 0, "no acknowledged write was lost without WAIT");
      assert.equal(dups.wait, 0, "keys that ran twice with waitReplicas: 1");
    });
  },
);
