// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * DynamoDbStore when DynamoDB does not answer: dynalite paused (SIGSTOP), the
 * late claim undone by its token; killed and restarted; throttled. dynalite
 * never throttles: its test server answers `ThrottlingException` to the next
 * N requests when asked (`dynalite_server.ts`), as DynamoDB answers a table
 * over its capacity, so that the SDK's retry is what the test sees.
 *
 * @module
 */

import assert from "node:assert/strict";
import { StoreError, type StoreEvent } from "../../src/store.ts";
import { startDynalite } from "../_support/dynalite.ts";
import { waitFor } from "../_support/time.ts";
import { dynamoStore, opts } from "./_dynamodb_fixtures.ts";

Deno.test("DynamoDbStore: a paused DynamoDB is a StoreError at the deadline, and the claim that lands late is released", async () => {
  await using dynalite = await startDynalite();
  const s = await dynamoStore(dynalite, { timeoutMs: 300 });
  const events: StoreEvent[] = [];
  s.store.subscribe((event) => events.push(event));
  dynalite.pause();
  const error = await s.store.claim("late", opts("f")).catch((e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal(error.operation, "claim");
  assert.match(error.message, /^DynamoDB claim did not answer within 300 ms/);
  dynalite.resume();
  await waitFor("the late claim's undo", () => events.length > 0);
  assert.deepEqual(events, [{
    type: "undo",
    slot: "late",
    outcome: "applied",
  }]);
  assert.equal((await s.store.claim("late", opts("f"))).state, "acquired");
});

Deno.test("DynamoDbStore: a killed DynamoDB is a StoreError on every operation; restarted, the store serves again", async () => {
  await using dynalite = await startDynalite();
  const s = await dynamoStore(dynalite, { timeoutMs: 5_000 });
  const claim = await s.store.claim("k", opts("f"));
  assert.equal(claim.state, "acquired");
  const token = claim.state === "acquired" ? claim.token : "";
  await dynalite.kill();
  const ok = { status: 200, headers: [], body: new Uint8Array(0) };
  for (
    const [operation, call] of [
      ["claim", () => s.store.claim("k", opts("f"))],
      ["complete", () => s.store.complete("k", token, ok)],
      ["release", () => s.store.release("k", token)],
      ["extend", () => s.store.extend("k", token, 1000)],
      ["peek", () => s.store.peek("k")],
      ["forget", () => s.store.forget("k")],
      ["stats", () => s.store.stats()],
    ] as const
  ) {
    const error = await (call as () => Promise<unknown>)().catch((e) => e);
    assert.ok(error instanceof StoreError, `${operation}: ${error}`);
    assert.equal(error.operation, operation);
    assert.match(error.message, new RegExp(`^DynamoDB ${operation} failed`));
  }
  await dynalite.restart();
  // dynalite keeps nothing: the table is gone, and the error says what to do.
  const gone = await s.store.claim("k", opts("f")).catch((e) => e);
  assert.match(String(gone.message), /run `await store.migrate\(\)`/);
  await s.store.migrate();
  assert.equal((await s.store.claim("k", opts("f"))).state, "acquired");
});

Deno.test("DynamoDbStore: throttling is answered by the SDK's retry, then a StoreError once its attempts are spent", async () => {
  await using dynalite = await startDynalite();
  const s = await dynamoStore(dynalite, { maxAttempts: 3, timeoutMs: 20_000 });
  const events: StoreEvent[] = [];
  s.store.subscribe((event) => events.push(event));
  await dynalite.throttle(1);
  assert.equal((await s.store.claim("a", opts("f"))).state, "acquired");
  assert.deepEqual(s.client.sent, ["PutItem", "PutItem"], "one retry");
  s.client.sent.length = 0;
  await dynalite.throttle(3);
  const error = await s.store.claim("b", opts("f")).catch((e) => e);
  assert.ok(error instanceof StoreError, String(error));
  assert.equal((error.cause as Error).name, "ThrottlingException");
  assert.match(error.message, /^DynamoDB claim failed: ThrottlingException/);
  assert.deepEqual(s.client.sent, ["PutItem", "PutItem", "PutItem"]);
  // Refused each time: nothing was written, so nothing is undone (an undo
  // would be sent at once, before this peek).
  assert.deepEqual(await s.store.peek("b"), { state: "absent" });
  assert.deepEqual(s.client.sent.slice(3), ["GetItem"]);
  assert.deepEqual(events, []);
});
