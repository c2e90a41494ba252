// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * examples/mysql.ts as a process against `MYSQL_URL`: a retried payment is
 * charged once and replayed byte for byte.
 *
 * @module
 */

import assert from "node:assert/strict";
import { freePort } from "../_support/services.ts";
import { MYSQL_URL, mysqlPool } from "../_support/mariadb.ts";
import { waitFor } from "../_support/time.ts";
import { dropStore, myTest } from "./_mysql_fixtures.ts";

const EXAMPLE = new URL("../../examples/mysql.ts", import.meta.url).pathname;

myTest("examples/mysql.ts replays a retried payment", async () => {
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", EXAMPLE],
    env: { MYSQL_URL, DENO_SERVE_ADDRESS: `tcp:127.0.0.1:${port}` },
    stdout: "null",
    stderr: "piped",
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
    });
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
    await child.stderr.cancel();
    const pool = mysqlPool();
    await dropStore(pool, "example_idempotency_keys").catch(() => {});
    await pool.end();
  }
});
