// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process of the cluster load tests: a `Deno.serve` on a free port
 * guarded by a RedisStore on a Redis Cluster, through node-redis
 * `createCluster` or ioredis `Cluster`; prints `listening <port>` when it
 * listens. Every execution is reported to the test's ledger server (outside
 * this process) before the handler answers.
 *
 *     deno run --allow-net --allow-env --allow-read tests/_support/cluster_app.ts \
 *       CLIENT PORTS PREFIX LEDGER_URL LEASE_MS WAIT_REPLICAS
 *
 * CLIENT is `node-redis` or `ioredis`; PORTS is the nodes' ports, comma
 * separated; WAIT_REPLICAS 0 leaves the option off.
 *
 * @module
 */
import { createCluster } from "redis";
import { Cluster } from "ioredis";
import { type RedisClientLike, RedisStore } from "../../src/stores/redis.ts";
import { serveApp } from "../faults/_load.ts";

const [kind, portList, prefix, ledger, lease, waitReplicas] = Deno.args;
const ports = portList!.split(",").map(Number);

let client: RedisClientLike;
if (kind === "node-redis") {
  const cluster = createCluster({
    rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })),
    defaults: { socket: { reconnectStrategy: () => 50 } },
  });
  cluster.on("error", () => {});
  await cluster.connect();
  client = cluster;
} else {
  const cluster = new Cluster(
    ports.map((port) => ({ host: "127.0.0.1", port })),
    { redisOptions: { maxRetriesPerRequest: null } },
  );
  cluster.on("error", () => {});
  await new Promise((resolve) => cluster.once("ready", resolve));
  client = cluster;
}
const replicas = Number(waitReplicas);
const store = new RedisStore({
  client,
  prefix: prefix!,
  timeoutMs: 500,
  ...(replicas > 0 ? { waitReplicas: replicas, waitTimeoutMs: 500 } : {}),
});

serveApp(async (key, body) => {
  const query = new URLSearchParams({ key, body });
  await (await fetch(`${ledger}/ran?${query}`, { method: "POST" })).text();
}, { scope: "global", store, lease: Number(lease) });
