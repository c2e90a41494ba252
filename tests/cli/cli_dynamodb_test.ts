// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `--dynamodb TABLE --endpoint URL --region R` on a private dynalite: inspect
 * a record the middleware wrote, count, forget it, and the usage errors of
 * the DynamoDB options; a table that is not there exits 3 naming it.
 * @module
 */

import assert from "node:assert/strict";
import { idempotency } from "../../mod.ts";
import { DynamoDbStore } from "../../src/stores/dynamodb.ts";
import { startDynalite } from "../_support/dynalite.ts";
import { cli, expectExit } from "../_support/cli.ts";

/** The AWS SDK's credential chain reads these; dynalite takes any. */
const AWS = { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test" };

Deno.test("cli --dynamodb inspects, counts and forgets a DynamoDbStore's records; an unknown table exits 3 naming it", async () => {
  await using dynalite = await startDynalite();
  const client = dynalite.client();
  const table = `cli_${crypto.randomUUID().slice(0, 8)}`;
  const store = new DynamoDbStore({ client, table });
  await store.migrate();
  const handler = idempotency(
    () => new Response("paid", { status: 201, headers: { "x-order": "7" } }),
    { scope: "global", store },
  );
  const post = new Request("http://localhost/pay", {
    method: "POST",
    headers: { "idempotency-key": "k1" },
  });
  await (await handler(post)).text();

  const at = ["--endpoint", dynalite.endpoint, "--region", "us-east-1"];
  const args = ["--dynamodb", table, ...at, "--global", "--key", "k1"];
  const found = JSON.parse(
    (await expectExit(0, ["inspect", ...args, "--json"], AWS)).stdout,
  );
  assert.equal(found.state, "completed");
  assert.equal(found.status, 201);
  assert.deepEqual(found.headerNames, ["content-type", "x-order"]);
  assert.equal(found.bodyBytes, 4);
  const text = await expectExit(0, ["inspect", ...args], AWS);
  assert.match(text.stdout, /^key "k1" in the global scope/);
  assert.match(text.stdout, /state +completed: retries get this answer/);

  const stats = await expectExit(0, ["stats", "--dynamodb", table, ...at], AWS);
  assert.equal(
    stats.stdout.trim(),
    "1 records: 0 in flight, 1 completed, 0 unreadable",
  );
  const gone = await expectExit(0, ["forget", ...args, "--yes"], AWS);
  assert.match(gone.stdout, /^deleted: key "k1"/);
  const absent = await expectExit(1, ["inspect", ...args], AWS);
  assert.match(absent.stdout, /state +absent/);

  const missing = await cli(
    ["stats", "--dynamodb", "no_such_table", ...at],
    AWS,
  );
  assert.equal(missing.code, 3);
  assert.match(
    missing.stderr,
    /^error: DynamoDB table no_such_table at 127\.0\.0\.1:\d+ is unreachable: .*no_such_table|ResourceNotFound/m,
  );
});

Deno.test("cli --dynamodb: its options' usage errors exit 2 before any request", async () => {
  const cases: [string[], RegExp][] = [
    [["--dynamodb", "t", "--table", "u"], /--dynamodb TABLE names the table/],
    [["--dynamodb", "t", "--prefix", "p"], /--dynamodb TABLE names the table/],
    [
      ["--dynamodb", "t", "--endpoint", "localhost:8000"],
      /--endpoint takes a URL/,
    ],
    [
      ["--redis", "redis://h:1", "--region", "eu-west-1"],
      /--endpoint and --region are for --dynamodb only/,
    ],
    [["--dynamodb"], /--dynamodb needs a value/],
  ];
  for (const [store, line] of cases) {
    const run = await expectExit(2, ["stats", ...store]);
    assert.match(run.stderr, line, store.join(" "));
  }
});
