// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Case 2 of the fault-injection suite: a real RedisStore on a private
 * `redis-server` (free port, temp dir), under load with duplicates (300
 * keys, 3 requests each, 16 at a time), while the server is paused
 * (SIGSTOP) past the store's `timeoutMs`, or killed and restarted empty, or
 * killed and restarted from its append-only file (`--appendfsync always`).
 *
 * Allowed:
 * - a 503 problem while the server is down or paused (the claim failed);
 * - after a restart WITHOUT persistence the server has forgotten every
 *   record: a key that ran before the loss may run once more after it (one
 *   2xx execution per key per server life). With AOF nothing is forgotten:
 *   one execution per key.
 * Everything else is a failure: a second execution within one server life,
 * an answer that is not the handler's bytes or a problem, and a key that is
 * still in flight half a lease after the load is over (a completion that
 * never landed, or a claim that timed out and landed later as an orphan).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createClient } from "redis";
import { RedisStore } from "../../src/stores/redis.ts";
import {
  redisServerIgnore,
  startRedisServer,
  testName,
} from "../_support/services.ts";
import {
  assertNoHarm,
  duplicates,
  guardedApp,
  load,
  loadFigures,
  perGeneration,
  report,
  settle,
  tally,
} from "./_load.ts";
import { waitFor } from "../_support/time.ts";

const ignore = await redisServerIgnore();
const KEYS = 300;
const DUPLICATES = 3;
const CONCURRENCY = 16;
const TIMEOUT_MS = 300;
const LEASE = 10_000;

type Fault = "pause" | "restart-empty" | "restart-aof";

async function underLoad(fault: Fault): Promise<void> {
  await using server = await startRedisServer({
    appendonly: fault === "restart-aof",
  });
  const client = createClient({
    url: server.url,
    socket: { reconnectStrategy: () => 20 },
  });
  client.on("error", () => {});
  await client.connect();
  try {
    const store = new RedisStore({
      client,
      prefix: "faults:",
      timeoutMs: TIMEOUT_MS,
    });
    const { ledger, send, storeErrors } = guardedApp(store, LEASE);
    const keys = Array.from({ length: KEYS }, (_, i) => `${fault}-k${i}`);
    let injected = false;
    const seen = tally();
    await load(send, ledger, {
      keys,
      duplicates: DUPLICATES,
      concurrency: CONCURRENCY,
      async progress(done, total) {
        if (injected || done < total / 3) return;
        injected = true;
        const before = storeErrors();
        if (fault === "pause") server.pause();
        else await server.kill();
        // Past the store's timeoutMs: wait until requests have failed on it.
        await waitFor(
          "store errors while the server is down",
          () => storeErrors() >= before + 5,
        );
        if (fault === "pause") server.resume();
        else {
          ledger.generation++;
          await server.restart();
        }
      },
    }, seen);
    assert.ok(injected, "the fault was injected");
    const settled = await settle(send, ledger, keys, LEASE / 2, seen);
    const dup = duplicates(
      ledger,
      fault === "restart-empty" ? perGeneration : undefined,
    );
    const lostWithServer = fault === "restart-empty"
      ? [...ledger.runs.values()].filter((runs) =>
        new Set(runs.filter((r) => r.status < 300).map((r) => r.generation))
          .size > 1
      ).length
      : 0;
    report(`redis ${fault}`, {
      faults: 1,
      storeErrors: storeErrors(),
      allowedRerunsAfterDataLoss: lostWithServer,
      ...loadFigures(seen, ledger, dup, settled),
    });
    assertNoHarm(dup, seen, settled);
  } finally {
    client.destroy();
  }
}

for (
  const [fault, what] of [
    ["pause", "paused (SIGSTOP) past timeoutMs"],
    ["restart-empty", "killed and restarted empty"],
    ["restart-aof", "killed and restarted with AOF (appendfsync always)"],
  ] as const
) {
  Deno.test({
    name: testName(
      `faults: RedisStore on a private redis-server ${what}, under load with duplicates`,
      ignore,
    ),
    ignore: ignore !== false,
    fn: () => underLoad(fault),
  });
}
