// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * examples/dynamodb.ts as a process against a dynalite of the test's own: a
 * retried payment is replayed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startDynalite } from "../_support/dynalite.ts";
import { freePort } from "../_support/http.ts";
import { waitFor } from "../_support/time.ts";

const EXAMPLE = new URL("../../examples/dynamodb.ts", import.meta.url).pathname;

Deno.test("examples/dynamodb.ts replays a retried payment", async () => {
  await using dynalite = await startDynalite();
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", EXAMPLE],
    env: {
      DYNAMODB_ENDPOINT: dynalite.endpoint,
      DYNAMODB_TABLE: "dynamo_example",
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      DENO_SERVE_ADDRESS: `tcp:127.0.0.1:${port}`,
    },
    stdout: "null",
    stderr: "null",
  }).spawn();
  const key = crypto.randomUUID();
  const pay = () =>
    fetch(`http://127.0.0.1:${port}/payments`, {
      method: "POST",
      headers: {
        "idempotency-key": key,
        authorization: "Bearer sk_test_alice",
        "content-type": "application/json",
      },
      body: JSON.stringify({ amount: 1200 }),
    });
  try {
    let first: Response | undefined;
    await waitFor("the example to listen", async () => {
      first = await pay().catch(() => undefined);
      return first !== undefined;
    }, 60_000);
    assert.equal(first!.status, 201);
    const paid = await first!.text();
    const retry = await pay();
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(await retry.text(), paid);
    assert.match(paid, /"amount":1200/);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
});
