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
import {
  CreateTableCommand,
  DescribeTimeToLiveCommand,
  PutItemCommand,
  ScanCommand,
  UpdateTimeToLiveCommand,
} from "@aws-sdk/client-dynamodb";
import { idempotency } from "../../mod.ts";
import { idempotencyTelemetry } from "../../src/otel.ts";
import { post } from "../_support/http.ts";
import { matches, sdkMetrics } from "../otel/_metrics.ts";
import { storeConformance } from "../../src/testing/testing.ts";
import {
  DynamoDbStore,
  INLINE_BYTES,
  MAX_CHUNKS,
} from "../../src/stores/dynamodb.ts";
import {
  type DynamoFixture,
  dynamoStore,
  opts,
  sharedDynalite,
} from "./_dynamodb_fixtures.ts";

const patched = sharedDynalite();
const plain = sharedDynalite(true);

for (
  const [name, dynalite] of [["DynamoDB's API", patched], [
    "dynalite as published",
    plain,
  ]] as const
) {
  let s: DynamoFixture;
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

/** Whether two bodies hold the same bytes. */
const same = (a: Uint8Array | null, b: Uint8Array) =>
  a !== null && a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
const utf8 = (text: string) => new TextEncoder().encode(text).byteLength;
const headers: [string, string][] = [["content-type", "application/json"]];
/** The body length that makes slot, fingerprint, headers and body exactly `bytes`. */
const bodyFor = (slot: string, bytes: number) =>
  bytes - utf8(slot) - utf8("f") - utf8(JSON.stringify(headers));

Deno.test("DynamoDbStore keeps a record of INLINE_BYTES in one item; one byte more goes to a chunk, read with one BatchGetItem", async () => {
  const s = await dynamoStore(await patched());
  for (
    const [bytes, requests] of [
      [INLINE_BYTES - 1, ["PutItem"]],
      [INLINE_BYTES, ["PutItem"]],
      [INLINE_BYTES + 1, ["PutItem", "BatchGetItem"]],
    ] as const
  ) {
    const slot = `size-${bytes}`;
    const claim = await s.store.claim(slot, opts("f"));
    assert.equal(claim.state, "acquired");
    if (claim.state !== "acquired") return;
    const body = new Uint8Array(bodyFor(slot, bytes)).map((_, i) => i * 7);
    s.client.sent.length = 0;
    assert.equal(
      await s.store.complete(slot, claim.token, { status: 200, headers, body }),
      "applied",
    );
    const writes = requests.length === 1
      ? ["UpdateItem"]
      : ["PutItem", "UpdateItem"];
    assert.deepEqual(s.client.sent, writes, `${bytes}: the completion`);
    s.client.sent.length = 0;
    const replay = await s.store.claim(slot, opts("f"));
    assert.deepEqual(s.client.sent, requests, `${bytes}: the replay`);
    assert.equal(replay.state, "completed");
    if (replay.state === "completed") {
      assert.ok(same(replay.response.body, body), `${bytes}: the body`);
    }
    const peeked = await s.store.peek(slot);
    assert.equal(peeked.state === "completed" && peeked.bodyBytes, body.length);
  }
});

Deno.test("DynamoDbStore keeps a body of MAX_CHUNKS chunks; one byte more is recorded without it, store_dropped", async () => {
  const s = await dynamoStore(await patched());
  const most = MAX_CHUNKS * INLINE_BYTES;
  for (const length of [most - 1, most, most + 1]) {
    const slot = `big-${length}`;
    const claim = await s.store.claim(slot, opts("f"));
    if (claim.state !== "acquired") throw new Error(claim.state);
    const body = new Uint8Array(length).fill(length % 251);
    assert.equal(
      await s.store.complete(slot, claim.token, { status: 200, headers, body }),
      "applied",
    );
    const replay = await s.store.claim(slot, opts("f"));
    if (replay.state !== "completed") throw new Error(replay.state);
    if (length <= most) {
      // Compared whole, not with deepEqual (its diff of 3 MB takes minutes).
      assert.ok(same(replay.response.body, body), `${length}: the body`);
    } else {
      assert.equal(replay.response.body, null);
      assert.equal(replay.response.omitted, "store_dropped");
    }
  }
});

/** The chunk items in the table (a scan: the store's own `stats` skips them). */
async function chunkItems(s: DynamoFixture) {
  const { Items } = await s.client.send(
    new ScanCommand({ TableName: s.table, ConsistentRead: true }),
  );
  return (Items ?? []).filter((item) => item.pk?.S?.startsWith("#chunk#"));
}

Deno.test("DynamoDbStore fences a chunked completion: a stale token's is lost, its chunks deleted, the owner's record untouched", async () => {
  const s = await dynamoStore(await patched());
  const stale = await s.store.claim("k", opts("old", { leaseMs: 1000 }));
  await s.elapse(1000);
  const owner = await s.store.claim("k", opts("new"));
  if (stale.state !== "acquired" || owner.state !== "acquired") {
    throw new Error("not acquired");
  }
  assert.equal(owner.recovered, true);
  const body = new Uint8Array(INLINE_BYTES * 2);
  const big = { status: 200, headers, body };
  assert.equal(await s.store.complete("k", stale.token, big), "lost");
  assert.equal(await s.store.extend("k", stale.token, 5000), "lost");
  assert.equal(await s.store.release("k", stale.token), "lost");
  assert.equal((await chunkItems(s)).length, 0, "the lost completion's chunks");
  const found = await s.store.peek("k");
  assert.equal(found.state === "in_flight" && found.fingerprint, "new");
  // A token of the same claim but for its last character is another token.
  const forged = owner.token.slice(0, -1) +
    (owner.token.endsWith("1") ? "2" : "1");
  assert.equal(await s.store.complete("k", forged, big), "lost");
  assert.equal(await s.store.complete("k", owner.token, big), "applied");
  assert.equal((await chunkItems(s)).length, 2);
  assert.equal(await s.store.forget("k"), "deleted");
  assert.equal((await chunkItems(s)).length, 0, "forget deletes the chunks");
  assert.deepEqual(await s.store.stats(), {
    inFlight: 0,
    completed: 0,
    unreadable: 0,
    exact: true,
    sealed: {},
  });
});

Deno.test("DynamoDbStore.stats stops after `limit` items and says so", async () => {
  const s = await dynamoStore(await patched());
  for (let i = 0; i < 5; i++) await s.store.claim(`s${i}`, opts("f"));
  const at = (limit: number) => s.store.stats({ limit });
  assert.deepEqual(await at(4), {
    inFlight: 4,
    completed: 0,
    unreadable: 0,
    exact: false,
    sealed: {},
  });
  assert.equal((await at(5)).inFlight, 5);
  assert.deepEqual(await at(6), {
    inFlight: 5,
    completed: 0,
    unreadable: 0,
    exact: true,
    sealed: {},
  });
  await assert.rejects(() => at(0), RangeError);
});

Deno.test("DynamoDbStore.migrate creates the table and its TTL, finds them the second time, and names a table it cannot use", async () => {
  const dynalite = await patched();
  const client = dynalite.client();
  const table = `dynamo_${crypto.randomUUID().slice(0, 8)}`;
  const store = new DynamoDbStore({ client, table });
  assert.deepEqual(await store.migrate(), { table: "created", ttl: "enabled" });
  assert.deepEqual(await store.migrate(), { table: "exists", ttl: "enabled" });
  const { TimeToLiveDescription } = await client.send(
    new DescribeTimeToLiveCommand({ TableName: table }),
  );
  assert.deepEqual(TimeToLiveDescription, {
    TimeToLiveStatus: "ENABLED",
    AttributeName: "ttl",
  });
  const other = `${table}_key`;
  await client.send(
    new CreateTableCommand({
      TableName: other,
      KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
      BillingMode: "PAY_PER_REQUEST",
    }),
  );
  await assert.rejects(
    () => new DynamoDbStore({ client, table: other }).migrate(),
    /has the key id \(HASH\): DynamoDbStore needs the partition key "pk" \(a string\) alone/,
  );
  const ttl = `${table}_ttl`;
  const store2 = new DynamoDbStore({ client, table: ttl });
  await store2.migrate();
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: ttl,
      TimeToLiveSpecification: { AttributeName: "expiry", Enabled: true },
    }),
  );
  await assert.rejects(
    () => store2.migrate(),
    /has TTL on "expiry": DynamoDbStore needs it on "ttl"/,
  );
  // dynalite as published knows no UpdateTimeToLive: said, not thrown.
  const bare = (await plain()).client();
  assert.deepEqual(
    await new DynamoDbStore({ client: bare, table }).migrate(),
    { table: "created", ttl: "unsupported" },
  );
});

Deno.test("DynamoDbStore refuses bad options with what is wrong", async () => {
  const client = (await patched()).client();
  assert.throws(
    () => new DynamoDbStore({ client: {} as never, table: "abc" }),
    /'client' must be a DynamoDBClient/,
  );
  for (const table of ["ab", "a".repeat(256), "a b", undefined]) {
    assert.throws(
      () => new DynamoDbStore({ client, table: table as string }),
      /'table' must be 3 to 255 characters/,
    );
  }
  new DynamoDbStore({ client, table: "abc" });
  new DynamoDbStore({ client, table: "a".repeat(255) });
  assert.throws(
    () => new DynamoDbStore({ client, table: "abc", timeoutMs: 0 }),
    RangeError,
  );
  assert.throws(
    () => new DynamoDbStore({ client, table: "abc", clock: 1 as never }),
    TypeError,
  );
  assert.throws(
    () => new DynamoDbStore({ client, table: "abc", region: "x" } as never),
    /region/,
  );
});

Deno.test("telemetry.store() names a DynamoDbStore 'dynamodb' and times its operations", async () => {
  const s = await dynamoStore(await patched());
  await using metrics = sdkMetrics();
  const telemetry = idempotencyTelemetry({
    meterProvider: metrics.meterProvider,
  });
  const store = telemetry.store(s.store);
  await store.claim("otel", opts("f"));
  const duration = (await metrics.collect()).get("idempotency.store.duration")!;
  const where = {
    "idempotency.store": "dynamodb",
    "idempotency.store.operation": "claim",
  };
  assert.equal(
    duration.points.filter((p) => matches(p.attributes, where)).length,
    1,
  );
});

Deno.test("DynamoDbStore.stats counts sealed records by the key id their seal names", async () => {
  const s = await dynamoStore(await patched());
  const key = await crypto.subtle.generateKey(
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
  const guarded = idempotency(() => new Response("secret", { status: 201 }), {
    store: s.store,
    scope: "global",
    encryption: { keys: [{ id: "2026-01", key }] },
  });
  for (const k of ["a", "b"]) await (await guarded(post(k))).arrayBuffer();
  await s.store.claim("c", opts("f"));
  assert.deepEqual(await s.store.stats(), {
    inFlight: 1,
    completed: 2,
    unreadable: 0,
    exact: true,
    sealed: { "2026-01": 2 },
  });
});

Deno.test("DynamoDbStore on dynalite as published reads the item after a failed put, and claims again when it was freed in between", async () => {
  const dynalite = await plain();
  const s = await dynamoStore(dynalite);
  const other = dynalite.client();
  const first = await s.store.claim("k", opts("old"));
  assert.equal(first.state, "acquired");
  // Between the put that failed and the store's GetItem, the live claim is
  // replaced by an expired one (as if it had been completed, then expired).
  let swap = true;
  s.client.middlewareStack.add((next, context) => async (args) => {
    if (context.commandName === "GetItemCommand" && swap) {
      swap = false;
      await other.send(
        new PutItemCommand({
          TableName: s.table,
          Item: {
            pk: { S: "k" },
            v: { N: "1" },
            state: { S: "in_flight" },
            fingerprint: { S: "old" },
            token: { S: "t" },
            lease_until: { N: String(s.time.now - 1) },
            expires_at: { N: String(s.time.now) },
          },
        }),
      );
    }
    return next(args);
  }, { step: "initialize" });
  s.client.sent.length = 0;
  const taken = await s.store.claim("k", opts("new"));
  assert.equal(taken.state, "acquired");
  assert.equal(taken.state === "acquired" && taken.recovered, false);
  assert.deepEqual(s.client.sent, ["PutItem", "GetItem", "PutItem"]);
});

Deno.test("DynamoDbStore reads a chunked body cut short as unreadable: in flight to a claim, unreadable to peek", async () => {
  const s = await dynamoStore(await patched());
  const claim = await s.store.claim("k", opts("f"));
  if (claim.state !== "acquired") throw new Error(claim.state);
  const body = new Uint8Array(INLINE_BYTES + 10).fill(3);
  await s.store.complete("k", claim.token, { status: 200, headers, body });
  const [last] = (await chunkItems(s)).filter((c) => c.pk!.S!.endsWith("#1"));
  await s.client.send(
    new PutItemCommand({
      TableName: s.table,
      Item: { ...last, body: { B: new Uint8Array(9).fill(3) } },
    }),
  );
  const replay = await s.store.claim("k", opts("f"));
  assert.equal(replay.state === "in_flight" && replay.fingerprint, null);
  assert.equal(
    (await s.store.peek("k", { response: true })).state,
    "unreadable",
  );
});
