// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's `peek`, `stats` and `forget` on values it did not write
 * (docs/architecture.md, Inspect and forget): a key of another type under
 * its prefix (a hash, a list, a set, a sorted set, a stream) and random
 * bytes read `unreadable` with their expiry, change nothing (the value and
 * its TTL as they were), count as unreadable, and are deleted by `forget`;
 * one without a TTL reads `expiresAt: null`. Claims on the same values are
 * in tests/stores/redis_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RedisStore } from "../../src/stores/redis.ts";
import {
  plantRedisPoison,
  REDIS_POISONS,
  REDIS_STRING_POISONS,
  redisTest,
} from "../_support/redis.ts";

/** The poisons that are not strings (or are random bytes): never a record's head. */
const FOREIGN = REDIS_POISONS.filter((kind) => !(kind in REDIS_STRING_POISONS));

redisTest(
  "RedisStore.peek() reads a key of another type, or random bytes, as unreadable with its expiry, and changes nothing; stats counts it, forget deletes it",
  "strength_foreign",
  async (client, prefix) => {
    const send = (args: (string | Uint8Array)[]) =>
      client.sendCommand(args as string[]);
    const store = new RedisStore({ client, prefix });
    assert.ok(FOREIGN.includes("list") && FOREIGN.includes("foreign_hash"));
    for (const kind of FOREIGN) {
      await plantRedisPoison(send, prefix + kind, kind);
    }
    await send(["RPUSH", `${prefix}forever`, "x"]); // no TTL
    for (const kind of FOREIGN) {
      const key = prefix + kind;
      const before = [await send(["TYPE", key]), await send(["PTTL", key])];
      const found = await store.peek(kind);
      assert.equal(found.state, "unreadable", kind);
      assert.ok(
        found.state === "unreadable" && found.expiresAt !== null,
        `${kind}: its TTL is an expiry`,
      );
      const [type, pttl] = [
        await send(["TYPE", key]),
        await send(["PTTL", key]),
      ];
      assert.equal(type, before[0], `${kind}: left as it was`);
      assert.ok(Number(pttl) > 0 && Number(pttl) <= Number(before[1]), kind);
    }
    assert.deepEqual(await store.peek("forever"), {
      state: "unreadable",
      expiresAt: null,
    });
    const counted = await store.stats();
    assert.deepEqual(
      { ...counted, sealed: undefined },
      {
        inFlight: 0,
        completed: 0,
        unreadable: FOREIGN.length + 1,
        exact: true,
        sealed: undefined,
      },
    );
    for (const kind of [...FOREIGN, "forever"]) {
      assert.equal(await store.forget(kind), "deleted", kind);
      assert.equal(await send(["EXISTS", prefix + kind]), 0, kind);
      assert.deepEqual(await store.peek(kind), { state: "absent" }, kind);
    }
    assert.equal((await store.stats()).unreadable, 0);
  },
);
