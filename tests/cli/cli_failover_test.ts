// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The CLI on a FailoverStore's two stores (`--redis … --postgres …`), as a
 * subprocess against the real Redis and PostgreSQL: a request held in flight
 * under the middleware's FailoverStore is in flight on both; `inspect` shows
 * both records and what a claim finds; `forget --yes` deletes on both, after
 * which `inspect` says absent on both and the key runs again. `forget
 * --redis` alone (the old runbook) leaves the PostgreSQL copy, which the app
 * answers 409 for and `inspect` of both shows. One store unreachable: exit 3,
 * with the other's answer printed. `stats` counts each store, labelled.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency } from "../../mod.ts";
import { FailoverStore } from "../../src/stores/failover.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { expectExit } from "../_support/cli.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import {
  DATABASE_URL,
  freePort,
  integrationTest,
  POSTGRES_IGNORE,
  postgresStore,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "../_support/services.ts";

const IGNORE = REDIS_IGNORE || POSTGRES_IGNORE;

/** The app: a FailoverStore (Redis, PostgreSQL) whose handler can be held. */
async function deployment() {
  const prefix = `${uniquePrefix("cli-fo")}:`;
  const client = createClient({ url: REDIS_URL });
  client.on("error", () => {});
  await client.connect();
  const pg = await postgresStore("cli_fo");
  const primary = new RedisStore({ client, prefix });
  const store = new FailoverStore({ primary, fallback: pg.store });
  let release = () => {};
  let running = () => {};
  let runs = 0;
  const handler = idempotency(async () => {
    runs++;
    const held = new Promise<void>((resolve) => release = resolve);
    running();
    await held;
    return new Response(`run ${runs}`, { status: 201 });
  }, { store, scope: (req) => req.headers.get("x-user")! });
  const post = (key: string) =>
    handler(
      new Request("http://api.test/pay", {
        method: "POST",
        headers: { "idempotency-key": key, "x-user": "alice" },
      }),
    );
  /** Starts a request and resolves once its handler runs (held). */
  const hold = async (key: string) => {
    const started = new Promise<void>((resolve) => running = resolve);
    const response = post(key);
    await started;
    return { response, release: () => release() };
  };
  return {
    post,
    hold,
    runs: () => runs,
    pg,
    redisArgs: ["--redis", REDIS_URL, "--prefix", prefix],
    pgArgs: ["--postgres", DATABASE_URL, "--table", `${pg.schema}.keys`],
    async [Symbol.asyncDispose]() {
      release();
      client.destroy();
      await deleteRedisKeys(prefix);
      await pg.drop();
    },
  };
}

integrationTest(
  "cli --redis --postgres: inspect shows both stores, forget deletes on both, and the key runs again",
  IGNORE,
  async () => {
    await using app = await deployment();
    const both = [...app.redisArgs, ...app.pgArgs];
    const named = ["--scope", "alice", "--key", "k-1"];
    const first = await app.hold("k-1");

    const shown = await expectExit(0, ["inspect", ...both, ...named]);
    const lines = shown.stdout.trimEnd().split("\n");
    assert.equal(lines[0], 'key "k-1" in scope "alice"');
    assert.match(lines[1]!, /^ {2}slot {9}[0-9a-f]{64}$/);
    assert.equal(lines[2], "  claim finds  the primary's record (in flight)");
    assert.equal(lines[3], `primary: Redis at ${new URL(REDIS_URL).host}`);
    assert.match(lines[4]!, /^ {2}state {8}in flight/);
    const fallback = lines.indexOf(
      `fallback: PostgreSQL at ${new URL(DATABASE_URL).host}`,
    );
    assert.ok(fallback > 4, shown.stdout);
    assert.match(lines[fallback + 1]!, /^ {2}state {8}in flight/);
    // PostgreSQL keeps the claim time: a claim just made is not "in 0 s".
    const claimed = lines.slice(fallback).find((l) => l.includes("claimed"))!;
    assert.match(claimed, /\((just now|\d+ s ago)\)$/);

    const json = JSON.parse(
      (await expectExit(0, ["inspect", ...both, ...named, "--json"])).stdout,
    );
    assert.equal(json.state, "in_flight");
    assert.equal(json.primary.state, "in_flight");
    assert.equal(json.fallback.state, "in_flight");
    assert.equal(json.primary.slot, json.slot);
    assert.equal(typeof json.fallback.claimedAt, "number");

    const stats = JSON.parse(
      (await expectExit(0, ["stats", ...both, "--json"])).stdout,
    );
    const one = {
      inFlight: 1,
      completed: 0,
      unreadable: 0,
      exact: true,
      sealed: {}, // completed records by the key id of their seal: none
    };
    assert.deepEqual(stats, { primary: one, fallback: one });
    const statsText = await expectExit(0, ["stats", ...both]);
    assert.equal(
      statsText.stdout,
      `primary: Redis at ${
        new URL(REDIS_URL).host
      }: 1 records: 1 in flight, 0 completed, 0 unreadable\n` +
        `fallback: PostgreSQL at ${
          new URL(DATABASE_URL).host
        }: 1 records: 1 in flight, 0 completed, 0 unreadable\n`,
    );

    const forgot = await expectExit(0, ["forget", ...both, ...named, "--yes"]);
    assert.match(forgot.stdout, /^ {2}primary: Redis at .*: deleted$/m);
    assert.match(forgot.stdout, /^ {2}fallback: PostgreSQL at .*: deleted$/m);
    assert.match(
      forgot.stdout,
      /deleted: the next request with it runs the handler/,
    );
    const gone = await expectExit(1, ["inspect", ...both, ...named, "--json"]);
    const absent = JSON.parse(gone.stdout);
    assert.equal(absent.state, "absent");
    assert.equal(absent.primary.state, "absent");
    assert.equal(absent.fallback.state, "absent");
    const again = await expectExit(1, [
      "forget",
      ...both,
      ...named,
      "--yes",
      "--json",
    ]);
    assert.deepEqual(JSON.parse(again.stdout), {
      slot: absent.slot,
      result: "absent",
      primary: { slot: absent.slot, result: "absent" },
      fallback: { slot: absent.slot, result: "absent" },
    });

    // The held run's completion is lost; the key runs the handler again.
    first.release();
    assert.equal((await first.response).status, 201);
    const second = await app.hold("k-1");
    second.release();
    assert.equal(await (await second.response).text(), "run 2");
  },
);

integrationTest(
  "cli forget --redis alone leaves the PostgreSQL copy the app answers 409 for; inspect of both shows it",
  IGNORE,
  async () => {
    await using app = await deployment();
    const named = ["--scope", "alice", "--key", "k-2"];
    const held = await app.hold("k-2");
    await expectExit(0, ["forget", ...app.redisArgs, ...named, "--yes"]);
    await expectExit(1, ["inspect", ...app.redisArgs, ...named]); // "absent"
    assert.equal((await app.post("k-2")).status, 409);

    const both = [...app.redisArgs, ...app.pgArgs];
    const shown = await expectExit(0, ["inspect", ...both, ...named]);
    assert.match(
      shown.stdout,
      /claim finds {2}the fallback's record \(in flight\)/,
    );
    const json = JSON.parse(
      (await expectExit(0, ["inspect", ...both, ...named, "--json"])).stdout,
    );
    assert.equal(json.state, "in_flight");
    assert.equal(json.primary.state, "absent");
    assert.equal(json.fallback.state, "in_flight");
    const forgot = await expectExit(0, ["forget", ...both, ...named, "--yes"]);
    assert.match(forgot.stdout, /primary: .*: absent \(nothing deleted\)/);
    assert.match(forgot.stdout, /fallback: .*: deleted/);
    held.release();
    await (await held.response).body?.cancel();
    const next = await app.hold("k-2");
    next.release();
    assert.equal((await next.response).status, 201);
    assert.equal(app.runs(), 2);
  },
);

integrationTest(
  "cli --redis --postgres with one store unreachable: exit 3, the other store's answer printed",
  IGNORE,
  async () => {
    await using app = await deployment();
    const named = ["--scope", "alice", "--key", "k-3"];
    const held = await app.hold("k-3");
    const port = freePort(); // nobody listens there
    const down = ["--redis", `redis://127.0.0.1:${port}`, ...app.pgArgs];

    const shown = await expectExit(3, ["inspect", ...down, ...named]);
    assert.match(
      shown.stdout,
      /claim finds {2}the fallback's record \(in flight\)/,
    );
    assert.match(shown.stdout, /^ {2}state {8}failed \(see the error\)$/m);
    assert.match(
      shown.stderr,
      new RegExp(
        `error: primary: Redis at 127.0.0.1:${port} is unreachable: .*ECONNREFUSED`,
      ),
    );
    const json = JSON.parse(
      (await expectExit(3, ["inspect", ...down, ...named, "--json"])).stdout,
    );
    assert.equal(json.state, "in_flight");
    assert.match(json.primary.error, /is unreachable/);
    assert.equal(json.fallback.state, "in_flight");

    const stats = await expectExit(3, ["stats", ...down]);
    assert.match(
      stats.stdout,
      /^fallback: PostgreSQL at .*: 1 records: 1 in flight/,
    );
    assert.match(stats.stderr, /primary: Redis at .* is unreachable/);

    const forgot = await expectExit(3, ["forget", ...down, ...named, "--yes"]);
    assert.match(
      forgot.stdout,
      /primary: .*: failed: a copy may be left \(forget again\)/,
    );
    assert.match(forgot.stdout, /fallback: .*: deleted/);
    // The summary does not say "deleted" while a copy may answer retries.
    assert.match(
      forgot.stdout,
      /^not done: the primary failed, and a copy there still answers its retries \(forget again once it answers\)$/m,
    );
    assert.doesNotMatch(forgot.stdout, /^deleted:/m);
    // Both unreachable: exit 3, nothing known.
    const pgDown = ["--postgres", `postgres://postgres@127.0.0.1:${port}/test`];
    const none = await expectExit(3, [
      "inspect",
      "--redis",
      `redis://127.0.0.1:${port}`,
      ...pgDown,
      ...named,
    ]);
    assert.match(
      none.stdout,
      /claim finds {2}nothing known: both stores failed/,
    );
    assert.equal(none.stderr.match(/^error: /gm)?.length, 2);
    held.release();
    await (await held.response).body?.cancel();
  },
);

Deno.test("cli two stores: only --redis (or --redis-cluster) with --postgres; bad options exit 2 before connecting", async () => {
  const cases: [string[], RegExp][] = [
    [
      ["stats", "--redis", "redis://h", "--kv", "a"],
      /name one store, or --redis with --postgres \(a FailoverStore\): --redis and --kv given/,
    ],
    [
      ["stats", "--redis", "redis://h", "--redis-cluster", "redis://h"],
      /--redis and --redis-cluster given/,
    ],
    [
      ["stats", "--postgres", "postgres://h/d", "--kv", "a"],
      /--postgres and --kv given/,
    ],
    [
      ["stats", "--redis-cluster", "h:1"],
      /--redis-cluster takes the URLs of cluster nodes, comma-separated .*current value is h:1/,
    ],
    // The table is checked before either store is reached.
    [[
      "stats",
      "--redis",
      "redis://127.0.0.1:1",
      "--postgres",
      "postgres://127.0.0.1:1/d",
      "--table",
      "a.b.c",
    ], /'table' must be/],
  ];
  for (const [args, message] of cases) {
    const run = await expectExit(2, args);
    assert.match(run.stderr, message, `cli ${args.join(" ")}`);
    assert.equal(run.stdout, "");
  }
});
