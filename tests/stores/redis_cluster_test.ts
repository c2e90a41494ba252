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
 * Each test starts its own cluster and stops it in `finally`. Every wait is
 * for a state (cluster_state:ok, slot owners, a replica's role), never for a
 * duration.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createCluster } from "redis";
import { Cluster } from "ioredis";
import { type RedisClientLike, RedisStore } from "../../src/stores/redis.ts";
import {
  type PoisonKind,
  storeConformance,
} from "../../src/testing/testing.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import {
  CLUSTER_IGNORE,
  type NodeInfo,
  type PrivateCluster,
  startCluster,
  waitUntil,
} from "../_support/cluster.ts";
import { testName, uniquePrefix } from "../_support/services.ts";
import { REDIS_STRING_POISONS } from "../_support/redis.ts";
import {
  Ledger,
  load,
  pool,
  report,
  type Send,
  sender,
  settle,
  type Tally,
  tally,
} from "../faults/_load.ts";
import { AppProcess, ControlServer } from "../faults/_servers.ts";

const ignore = CLUSTER_IGNORE;
/**
 * The node timeout of clusters in which no node is killed: long enough that a
 * node slowed by a loaded machine is never marked failing (which answers
 * CLUSTERDOWN mid-test); the kill tests keep the short default, so that a
 * dead master fails over quickly.
 */
const CALM_NODE_TIMEOUT_MS = 15_000;

/** A test on private clusters, ignored with the reason when they cannot run. */
function clusterTest(
  name: string,
  fn: (t: Deno.TestContext) => Promise<void>,
): void {
  Deno.test({
    name: testName(name, ignore),
    ignore: ignore !== false,
    sanitizeOps: false,
    sanitizeResources: false,
    fn,
  });
}
const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };

interface Opened {
  client: RedisClientLike;
  close(): Promise<void> | void;
}

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

async function ioRedisCluster(cluster: PrivateCluster): Promise<Opened> {
  const client = ioCluster(cluster);
  await waitReady(client);
  return { client, close: () => client.disconnect() };
}

function ioCluster(cluster: PrivateCluster): Cluster {
  const client = new Cluster(cluster.rootNodes, {
    lazyConnect: false,
    redisOptions: { maxRetriesPerRequest: null },
  });
  client.on("error", () => {});
  return client;
}

function waitReady(client: Cluster): Promise<void> {
  if (client.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    client.once("ready", resolve);
    client.once("end", () => reject(new Error("ioredis Cluster ended")));
  });
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

const LEASE = 1000;

/** The test's ledger server: each app reports an execution before it answers. */
class LedgerServer extends ControlServer {
  readonly ledger = new Ledger();

  protected answer(q: (name: string) => string): Response {
    this.ledger.record(q("key"), 201, q("body"));
    return new Response("ok");
  }
}

/** Two app processes, one per client, with or without `waitReplicas`. */
class Apps {
  readonly processes: AppProcess[];
  send!: Send;

  constructor(
    cluster: PrivateCluster,
    ledger: LedgerServer,
    prefix: string,
    waitReplicas: number,
  ) {
    const script =
      new URL("../_support/cluster_app.ts", import.meta.url).pathname;
    const ports = cluster.nodes.map((n) => n.port).join(",");
    this.processes = ["node-redis", "ioredis"].map((kind) =>
      new AppProcess(script, [
        kind,
        ports,
        prefix,
        ledger.url,
        String(LEASE),
        String(waitReplicas),
      ], {})
    );
  }

  async ready(): Promise<this> {
    const [a, b] = (await Promise.all(this.processes.map((p) => p.port))).map(
      sender,
    );
    let i = 0;
    this.send = (key) => (i++ % 2 === 0 ? a! : b!)(key);
    return this;
  }

  async kill(): Promise<void> {
    await Promise.all(this.processes.map((p) => p.kill()));
  }
}

/**
 * Sends batches of 60 fresh keys, 3 times each (duplicates race, spread over
 * both processes), starting `fault` after the first batch and going on until
 * it has finished and at least `minKeys` keys were sent. Answers the keys.
 */
async function loadDuring(
  send: Send,
  ledger: Ledger,
  seen: Tally,
  label: string,
  fault: () => Promise<void>,
  minKeys = 300,
): Promise<string[]> {
  const keys: string[] = [];
  let running: Promise<void> | undefined;
  let done = false;
  for (let batch = 0; !done || keys.length < minKeys; batch++) {
    const group = Array.from(
      { length: 60 },
      (_, i) => `${label}-${batch}-${i}`,
    );
    keys.push(...group);
    await load(
      send,
      ledger,
      { keys: group, duplicates: 3, concurrency: 16 },
      seen,
    );
    if (running === undefined) {
      running = fault().finally(() => done = true);
      running.catch(() => {});
    }
  }
  await running;
  return keys;
}

/** MOVED and ASK errors the live nodes answered (INFO errorstats). */
async function redirections(
  cluster: PrivateCluster,
): Promise<{ moved: number; ask: number }> {
  let moved = 0;
  let ask = 0;
  for (const port of cluster.livePorts) {
    const info = await cluster.cli(port, "INFO", "errorstats");
    moved += Number(/errorstat_MOVED:count=(\d+)/.exec(info)?.[1] ?? 0);
    ask += Number(/errorstat_ASK:count=(\d+)/.exec(info)?.[1] ?? 0);
  }
  return { moved, ask };
}

/**
 * Claims `slot` (acquired), runs `between`, and completes it with a 201 of
 * `body` (applied).
 */
async function claimAndComplete(
  store: RedisStore,
  slot: string,
  body: Uint8Array,
  between?: () => Promise<void>,
): Promise<void> {
  const claim = await store.claim(slot, opts);
  assert.equal(claim.state, "acquired");
  if (claim.state !== "acquired") return;
  await between?.();
  assert.equal(
    await store.complete(slot, claim.token, { status: 201, headers: [], body }),
    "applied",
  );
}

async function flushScripts(cluster: PrivateCluster): Promise<void> {
  for (const { master } of await cluster.pairs()) {
    await cluster.cli(master.port, "SCRIPT", "FLUSH");
  }
}

/** Every key settles into a replay; counts duplicates (among `keys`) and stuck keys. */
async function verdict(
  apps: Apps,
  ledger: Ledger,
  keys: string[],
  seen: Tally,
): Promise<{ duplicates: number; dupKeys: string[]; stuck: string[] }> {
  const settled = await settle(apps.send, ledger, keys, 30_000, seen);
  const mine = new Set(keys);
  const dupKeys: string[] = [];
  let count = 0;
  for (const [key, runs] of ledger.runs) {
    if (!mine.has(key) || runs.length < 2) continue;
    count += runs.length - 1;
    dupKeys.push(`${key} x${runs.length}`);
  }
  return { duplicates: count, dupKeys, stuck: settled.stuck };
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
