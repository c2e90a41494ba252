// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore with a `subscriber`: its `waitForChange()` passes the store
 * conformance suite's case, and a duplicate waiting in another middleware
 * instance (its own clients on the same Redis) is woken by the `PUBLISH`
 * that follows the first request's completion.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createClient } from "redis";
import { RedisStore } from "../src/stores/redis.ts";
import { checkStoreConformance } from "../src/testing/testing.ts";
import {
  integrationTest,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./_support/services.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import { assertWaiterWoken } from "./_support/stores.ts";
import { sleep, waitFor } from "./_support/time.ts";

async function connect() {
  return await createClient({ url: REDIS_URL }).connect();
}

integrationTest(
  "RedisStore with a subscriber passes the conformance suite, waitForChange() included",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("waitsub")}:`;
    const client = await connect();
    const subscriber = await client.duplicate().connect();
    const store = new RedisStore({ client, prefix, subscriber });
    assert.equal(typeof store.waitForChange, "function");
    assert.equal(new RedisStore({ client, prefix }).waitForChange, undefined);
    try {
      await checkStoreConformance({
        setup: () => Promise.resolve({ store, elapse: sleep }),
      });
    } finally {
      await deleteRedisKeys(prefix);
      subscriber.destroy();
      client.destroy();
    }
  },
);

integrationTest(
  "idempotency() with waitForInFlight on RedisStore with a subscriber wakes a duplicate of another instance by PUBLISH",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("waitsub")}:`;
    const [clientA, clientB] = [await connect(), await connect()];
    const subscriberA = await clientA.duplicate().connect();
    const subscriberB = await clientB.duplicate().connect();
    try {
      await assertWaiterWoken(
        new RedisStore({ client: clientA, prefix, subscriber: subscriberA }),
        new RedisStore({ client: clientB, prefix, subscriber: subscriberB }),
        "the subscription",
      );
    } finally {
      await deleteRedisKeys(prefix);
      for (const c of [subscriberA, subscriberB, clientA, clientB]) c.destroy();
    }
  },
);

integrationTest(
  "RedisStore.waitForChange() resolves at the PUBLISH of a completion made after it subscribed and looked",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("waitsub")}:`;
    const client = await connect();
    const subscriber = await client.duplicate().connect();
    let looks = 0;
    // The store's commands through a RedisCommander that counts the look
    // (the EVAL that reads the state once subscribed).
    const commander = {
      async sendCommand(args: (string | Uint8Array)[]) {
        const reply = await client.sendCommand(
          args.map((a) => typeof a === "string" ? a : Buffer.from(a)),
        );
        if (args[0] === "EVAL") looks++;
        return reply;
      },
    };
    const store = new RedisStore({ client: commander, prefix, subscriber });
    const writer = new RedisStore({ client, prefix });
    try {
      const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };
      const claim = await store.claim("s", options);
      assert.equal(claim.state, "acquired");
      const stop = new AbortController();
      let changed = false;
      const watching = store.waitForChange!("s", stop.signal).then(() =>
        changed = true
      );
      await waitFor("the look", () => looks === 1);
      assert.equal(changed, false);
      if (claim.state === "acquired") {
        // Completed through the store that publishes.
        await store.complete("s", claim.token, {
          status: 201,
          headers: [],
          body: new TextEncoder().encode("paid"),
        });
      }
      await waitFor("the change", () => changed, 5_000);
      await watching;
      assert.equal((await writer.claim("s", options)).state, "completed");
    } finally {
      await deleteRedisKeys(prefix);
      subscriber.destroy();
      client.destroy();
    }
  },
);

integrationTest(
  "RedisStore.forget() on a store without a subscriber still PUBLISHes: a waiter of another instance wakes",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("waitforget")}:`;
    const client = await connect();
    const subscriber = await client.duplicate().connect();
    try {
      const waiting = new RedisStore({ client, prefix, subscriber });
      const admin = new RedisStore({ client, prefix }); // as the CLI's
      const claim = { fingerprint: "f", leaseMs: 60_000, ttlMs: 60_000 };
      assert.equal((await waiting.claim("s", claim)).state, "acquired");
      const stop = new AbortController();
      let woken = false;
      const change = waiting.waitForChange!("s", stop.signal).then(() => {
        woken = true;
      });
      // Subscribed once the channel counts a subscriber.
      await waitFor("the waiter to subscribe", async () => {
        const reply = await client.sendCommand([
          "PUBSUB",
          "NUMSUB",
          `${prefix}s`,
        ]) as [string, number];
        return Number(reply[1]) > 0;
      });
      assert.equal(await admin.forget("s"), "deleted");
      await waitFor("the waiter to wake", () => woken);
      await change;
      stop.abort();
    } finally {
      await deleteRedisKeys(prefix);
      subscriber.destroy();
      client.destroy();
    }
  },
);
