// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * DynamoDbStore on dynalite (started here, its own process): the conformance
 * suite on dynalite with `ReturnValuesOnConditionCheckFailure` (as DynamoDB
 * has it) and on dynalite as published (the store's fallback: a `GetItem`
 * after a failed put), the requests each operation makes, fencing, the item
 * size boundary and the table's migration.
 *
 * @module
 */

import assert from "node:assert/strict";
import { storeConformance } from "../../src/testing/testing.ts";
import { dynamoStore, opts, sharedDynalite } from "./_dynamodb_fixtures.ts";

const patched = sharedDynalite();
const plain = sharedDynalite(true);

for (
  const [name, dynalite] of [["DynamoDB's API", patched], [
    "dynalite as published",
    plain,
  ]] as const
) {
  let s: Awaited<ReturnType<typeof dynamoStore>>;
  storeConformance({
    name: `DynamoDbStore (${name})`,
    async setup() {
      s = await dynamoStore(await dynalite());
      return {
        store: s.store,
        elapse: s.elapse,
        advanceClock: s.elapse,
        poison: s.poison,
      };
    },
  });
}

Deno.test("DynamoDbStore answers a replay and a conflict in one PutItem", async () => {
  const s = await dynamoStore(await patched());
  const claim = await s.store.claim("k", opts("f"));
  assert.equal(claim.state, "acquired");
  assert.deepEqual(s.client.sent, ["PutItem"]);
  s.client.sent.length = 0;
  assert.equal((await s.store.claim("k", opts("f"))).state, "in_flight");
  assert.deepEqual(s.client.sent, ["PutItem"], "a conflict");
  if (claim.state !== "acquired") return;
  const ok = { status: 201, headers: [], body: new Uint8Array([1]) };
  assert.equal(await s.store.complete("k", claim.token, ok), "applied");
  s.client.sent.length = 0;
  const replay = await s.store.claim("k", opts("f"));
  assert.equal(replay.state, "completed");
  assert.deepEqual(s.client.sent, ["PutItem"], "a replay");
});
