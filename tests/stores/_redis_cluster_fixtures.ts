// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the Redis Cluster tests share (`redis_cluster_test.ts`,
 * `redis_cluster_failover_test.ts`): {@linkcode clusterTest}, an ioredis
 * cluster client, the two app processes under load with their ledger, and
 * the verdict of a load (duplicates and stuck keys).
 *
 * @module
 */

import assert from "node:assert/strict";
import { Cluster } from "ioredis";
import type { RedisClientLike, RedisStore } from "../../src/stores/redis.ts";
import { CLUSTER_IGNORE, type PrivateCluster } from "../_support/cluster.ts";
import { testName } from "../_support/services.ts";
import {
  Ledger,
  load,
  type Send,
  sender,
  settle,
  type Tally,
} from "../faults/_load.ts";
import { AppProcess, ControlServer } from "../faults/_servers.ts";

export const ignore = CLUSTER_IGNORE;

/** A test on private clusters, ignored with the reason when they cannot run. */
export function clusterTest(
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
export const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };

export interface Opened {
  client: RedisClientLike;
  close(): Promise<void> | void;
}

export async function ioRedisCluster(cluster: PrivateCluster): Promise<Opened> {
  const client = ioCluster(cluster);
  await waitReady(client);
  return { client, close: () => client.disconnect() };
}

export function ioCluster(cluster: PrivateCluster): Cluster {
  const client = new Cluster(cluster.rootNodes, {
    lazyConnect: false,
    redisOptions: { maxRetriesPerRequest: null },
  });
  client.on("error", () => {});
  return client;
}

export function waitReady(client: Cluster): Promise<void> {
  if (client.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    client.once("ready", resolve);
    client.once("end", () => reject(new Error("ioredis Cluster ended")));
  });
}

export const LEASE = 1000;

/** The test's ledger server: each app reports an execution before it answers. */
export class LedgerServer extends ControlServer {
  readonly ledger = new Ledger();

  protected answer(q: (name: string) => string): Response {
    this.ledger.record(q("key"), 201, q("body"));
    return new Response("ok");
  }
}

/** Two app processes, one per client, with or without `waitReplicas`. */
export class Apps {
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
export async function loadDuring(
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
export async function redirections(
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
export async function claimAndComplete(
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

/** Every key settles into a replay; counts duplicates (among `keys`) and stuck keys. */
export async function verdict(
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
