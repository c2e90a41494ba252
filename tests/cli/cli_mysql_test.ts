// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `@idempotent/http/cli` on a MysqlStore (`--mysql URL [--table T]`), as a
 * subprocess against `MYSQL_URL`: inspect (human and JSON, by key and by
 * slot), stats, forget, an unreadable row, a missing table, a refused
 * connection, and the flags that do not go with it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency } from "../../mod.ts";
import { MysqlStore } from "../../src/stores/mysql.ts";
import { freePort, uniquePrefix } from "../_support/services.ts";
import { MYSQL_URL, mysqlPool } from "../_support/mariadb.ts";
import { dropStore, myTest, plant } from "../stores/_mysql_fixtures.ts";

const CLI = new URL("../../src/cli/cli.ts", import.meta.url).pathname;
const decoder = new TextDecoder();

async function expectExit(code: number, ...args: string[]) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    env: { NO_COLOR: "1", CLI_SECRET: "s".repeat(32) },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const run = {
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
  assert.equal(
    output.code,
    code,
    `cli ${args.join(" ")} exited ${output.code}:\n${run.stdout}${run.stderr}`,
  );
  return run;
}

myTest("cli inspects, counts and forgets a MysqlStore's records", async () => {
  const pool = mysqlPool();
  const table = uniquePrefix("cli");
  try {
    const store = new MysqlStore({ pool, table });
    await store.migrate();
    const handler = idempotency(
      () => Response.json({ id: "pay_1" }, { status: 201 }),
      { scope: "global", store, secret: "s".repeat(32) },
    );
    const key = `key-${crypto.randomUUID()}`;
    const paid = await handler(
      new Request("http://api.test/pay", {
        method: "POST",
        headers: { "idempotency-key": key },
        body: "{}",
      }),
    );
    assert.equal(paid.status, 201);
    await paid.body?.cancel();
    const args = ["--mysql", MYSQL_URL, "--table", table];
    const named = ["--global", "--key", key, "--secret-env", "CLI_SECRET"];

    const human = await expectExit(0, "inspect", ...args, ...named);
    assert.match(human.stdout, /completed/);
    assert.match(human.stdout, /status +201/);
    const json = JSON.parse(
      (await expectExit(0, "inspect", ...args, ...named, "--json")).stdout,
    );
    const slot: string = json.slot;
    assert.deepEqual(
      [json.state, json.status, json.bodyBytes],
      ["completed", 201, '{"id":"pay_1"}'.length],
    );
    const bySlot = JSON.parse(
      (await expectExit(0, "inspect", ...args, "--slot", slot, "--json"))
        .stdout,
    );
    assert.deepEqual(bySlot, json);

    await plant(pool, table, "planted", "future_version");
    const odd = JSON.parse(
      (await expectExit(0, "inspect", ...args, "--slot", "planted", "--json"))
        .stdout,
    );
    assert.equal(odd.state, "unreadable");
    const stats = JSON.parse(
      (await expectExit(0, "stats", ...args, "--json")).stdout,
    );
    assert.deepEqual(
      [stats.inFlight, stats.completed, stats.unreadable, stats.exact],
      [0, 1, 1, true],
    );

    const forgot = JSON.parse(
      (await expectExit(0, "forget", ...args, ...named, "--yes", "--json"))
        .stdout,
    );
    assert.deepEqual(forgot, { slot, result: "deleted" });
    await expectExit(1, "inspect", ...args, ...named);
    await expectExit(1, "forget", ...args, ...named, "--yes");

    const missing = await expectExit(
      3,
      "stats",
      "--mysql",
      MYSQL_URL,
      "--table",
      `${table}_missing`,
    );
    assert.match(
      missing.stderr,
      /doesn't exist: run `await store\.migrate\(\)`.*\(is --table the app's\?\)/,
    );
  } finally {
    await dropStore(pool, table);
    await pool.end();
  }
});

Deno.test("cli refuses --mysql with flags of other stores, and a bad --table, before connecting", async () => {
  const url = "mysql://root@h/db";
  const usage = async (pattern: RegExp, ...args: string[]) =>
    assert.match((await expectExit(2, "stats", ...args)).stderr, pattern);
  await usage(
    /--prefix is for --redis and --kv: MySQL takes --table/,
    "--mysql",
    url,
    "--prefix",
    "p",
  );
  await usage(
    /name one store/,
    "--mysql",
    url,
    "--postgres",
    "postgres://h/db",
  );
  await usage(/name one store/, "--mysql", url, "--redis", "redis://h");
  await usage(/'table' must be/, "--mysql", url, "--table", "a.b.c");
  await usage(/--mysql needs a value/, "--mysql");
});

Deno.test("cli says which MySQL it could not reach, without the password", async () => {
  const port = freePort();
  const run = await expectExit(
    3,
    "inspect",
    "--mysql",
    `mysql://root:hunter2@127.0.0.1:${port}/test`,
    "--global",
    "--key",
    "k",
  );
  assert.match(
    run.stderr,
    new RegExp(`MySQL at 127.0.0.1:${port}.*ECONNREFUSED`),
  );
  assert.ok(!run.stderr.includes("hunter2"), "the password is never shown");
});
