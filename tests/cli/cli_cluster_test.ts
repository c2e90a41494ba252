// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The CLI on a private Redis Cluster (tests/_support/cluster.ts), as a
 * subprocess: records the middleware wrote on each of the 3 masters (keys
 * picked so that their slots hash to different masters) are inspected and
 * forgotten through `--redis-cluster`, routed by slot; `--redis` with one
 * node is detected as a cluster and routes the same way; `stats` counts
 * across every master, honouring `--limit` at n-1/n/n+1 and saying
 * `exact: false` when it stopped.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createCluster } from "redis";
import { idempotency, slotOf } from "../../mod.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { expectExit } from "../_support/cli.ts";
import { CLUSTER_IGNORE, startCluster } from "../_support/cluster.ts";
import {
  DATABASE_URL,
  freePort,
  POSTGRES_IGNORE,
  postgresStore,
  testName,
} from "../_support/services.ts";

/** Redis Cluster's key slot (CRC16/XMODEM of the key, mod 16384; no hash tags here). */
function keySlot(key: string): number {
  let crc = 0;
  for (const byte of new TextEncoder().encode(key)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) {
      crc = (crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1) & 0xffff;
    }
  }
  return crc % 16384;
}

Deno.test({
  name: testName(
    "cli on a Redis Cluster: inspect and forget a key on each master, stats across the masters",
    CLUSTER_IGNORE,
  ),
  ignore: CLUSTER_IGNORE !== false,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await using cluster = await startCluster({ nodeTimeoutMs: 15_000 });
    const client = createCluster({
      rootNodes: cluster.rootNodes.map(({ host, port }) => ({
        url: `redis://${host}:${port}`,
      })),
    });
    client.on("error", () => {});
    await client.connect();
    try {
      const prefix = "cli-cluster:";
      const store = new RedisStore({ client, prefix });
      const handler = idempotency(
        () => new Response("paid", { status: 201 }),
        { store, scope: (req) => req.headers.get("x-user")! },
      );
      // One key per master: the master serving its Redis key's slot.
      const pairs = await cluster.pairs();
      const masterOf = (key: string) => {
        const slot = keySlot(prefix + slotOf("alice", key));
        return pairs.find(({ master }) =>
          master.slots.some(([a, b]) => a <= slot && slot <= b)
        )!.master.port;
      };
      const keys = new Map<number, string>();
      for (let i = 0; keys.size < pairs.length; i++) {
        const port = masterOf(`k-${i}`);
        if (!keys.has(port)) keys.set(port, `k-${i}`);
      }
      // The test's slot hashing agrees with the server's.
      const [port0, key0] = [...keys][0]!;
      const redisKey0 = prefix + slotOf("alice", key0);
      assert.equal(
        await cluster.cli(port0, "CLUSTER", "KEYSLOT", redisKey0),
        String(keySlot(redisKey0)),
      );
      for (const key of keys.values()) {
        const res = await handler(
          new Request("http://api.test/pay", {
            method: "POST",
            headers: { "idempotency-key": key, "x-user": "alice" },
          }),
        );
        assert.equal(res.status, 201);
        await res.body?.cancel();
      }
      const claim = await store.claim("in-flight-slot", {
        fingerprint: "fp",
        leaseMs: 60_000,
        ttlMs: 60_000,
      });
      assert.equal(claim.state, "acquired");
      await client.set(`${prefix}unreadable-slot`, "not a record", {
        PX: 60_000,
      });

      const urls = cluster.rootNodes.slice(0, 2).map(({ host, port }) =>
        `redis://${host}:${port}`
      ).join(",");
      const onCluster = ["--redis-cluster", urls, "--prefix", prefix];
      for (const [port, key] of keys) {
        const named = ["--scope", "alice", "--key", key];
        const found = JSON.parse(
          (await expectExit(0, ["inspect", ...onCluster, ...named, "--json"]))
            .stdout,
        );
        assert.equal(found.state, "completed", `${key} on ${port}`);
        assert.equal(found.status, 201);
        // One node's URL, as the app's REDIS_URL: detected, routed by slot.
        const other = pairs.find(({ master }) => master.port !== port)!;
        const detected = await expectExit(0, [
          "inspect",
          "--redis",
          `redis://127.0.0.1:${other.master.port}`,
          "--prefix",
          prefix,
          ...named,
        ]);
        assert.match(detected.stdout, /completed/);
        assert.match(
          detected.stderr,
          /^note: Redis at 127\.0\.0\.1:\d+ is a Redis Cluster node: keys are routed by slot/,
        );
      }

      const stats = async (...more: string[]) =>
        await expectExit(0, ["stats", ...onCluster, "--json", ...more]);
      assert.deepEqual(JSON.parse((await stats()).stdout), {
        inFlight: 1,
        completed: 3,
        unreadable: 1,
        exact: true,
      });
      // 5 records: --limit 4 stops (a lower bound), 5 and 6 count them all.
      const under = await stats("--limit", "4");
      const counted = JSON.parse(under.stdout);
      assert.equal(counted.exact, false);
      assert.equal(
        counted.inFlight + counted.completed + counted.unreadable,
        4,
      );
      assert.match(under.stderr, /lower bound \(raise --limit\)/);
      for (const limit of ["5", "6"]) {
        const all = await stats("--limit", limit);
        assert.equal(JSON.parse(all.stdout).exact, true, limit);
        assert.equal(all.stderr, "");
      }
      const text = await expectExit(0, ["stats", ...onCluster]);
      assert.equal(
        text.stdout,
        "5 records: 1 in flight, 3 completed, 1 unreadable\n",
      );

      // On a FailoverStore whose primary is the cluster (PostgreSQL empty).
      if (POSTGRES_IGNORE === false) {
        await using pg = await postgresStore("cli_cluster");
        const pgArgs = [
          "--postgres",
          DATABASE_URL,
          "--table",
          `${pg.schema}.keys`,
        ];
        const named = ["--scope", "alice", "--key", key0];
        const both = await expectExit(0, [
          "inspect",
          ...onCluster,
          ...pgArgs,
          ...named,
        ]);
        assert.match(
          both.stdout,
          /claim finds {2}the primary's record \(completed\)/,
        );
        assert.match(both.stdout, /^primary: Redis Cluster at /m);
      }

      for (const key of keys.values()) {
        const named = ["--scope", "alice", "--key", key];
        const forgot = JSON.parse(
          (await expectExit(0, [
            "forget",
            ...onCluster,
            ...named,
            "--yes",
            "--json",
          ]))
            .stdout,
        );
        assert.equal(forgot.result, "deleted");
        await expectExit(1, ["inspect", ...onCluster, ...named]);
        await expectExit(1, ["forget", ...onCluster, ...named, "--yes"]);
      }
      assert.deepEqual(JSON.parse((await stats()).stdout), {
        inFlight: 1,
        completed: 0,
        unreadable: 1,
        exact: true,
      });
    } finally {
      client.destroy();
    }
  },
});

Deno.test("cli --redis-cluster with no node reachable exits 3 naming the cluster", async () => {
  const [a, b] = [freePort(), freePort()]; // nobody listens there
  const run = await expectExit(3, [
    "stats",
    "--redis-cluster",
    `redis://127.0.0.1:${a},redis://127.0.0.1:${b}`,
  ]);
  assert.match(
    run.stderr,
    new RegExp(
      `^error: Redis Cluster at 127\\.0\\.0\\.1:${a} is unreachable: `,
    ),
  );
  assert.equal(run.stdout, "");
});
