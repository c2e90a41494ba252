// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * SqliteStore's transactional mode in one process, on real files: the
 * handler's rows and the record commit in one `BEGIN IMMEDIATE` transaction
 * or not at all; a keyless request gets a plain transaction; the process's
 * other writes wait for the transaction without blocking the event loop.
 * Crashes and other processes: `sqlite_transaction_crash_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { DatabaseSync } from "node:sqlite";
import { Hono } from "hono";
import { idempotency } from "../../src/idempotency.ts";
import { idempotent } from "../../src/hono.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import { StoreError } from "../../src/store.ts";
import { slotOf } from "../../src/fingerprint.ts";
import { post } from "../_support/http.ts";
import { deferred } from "../_support/time.ts";
import { ok, opts, sqliteStore } from "./_sqlite_fixtures.ts";

type Setup = Awaited<ReturnType<typeof sqliteStore>>;

async function setup(
  options: Parameters<typeof sqliteStore>[0] = {},
): Promise<Setup & { count(): number }> {
  const s = await sqliteStore(options);
  s.db.exec("CREATE TABLE effects (key TEXT, n INTEGER)");
  return Object.assign(s, {
    count: () =>
      Number(s.db.prepare("SELECT count(*) AS n FROM effects").get()!.n),
  });
}

function insert(db: DatabaseSync, request: Request): void {
  db.prepare("INSERT INTO effects (key) VALUES (?)").run(
    request.headers.get("idempotency-key"),
  );
}

Deno.test("SqliteStore.transactional() commits the handler's rows with the record; a retry replays", async () => {
  await using s = await setup();
  let runs = 0;
  const handler = idempotency(
    s.store.transactional((request, db) => {
      runs++;
      assert.equal(db.isTransaction, true);
      assert.notEqual(db, s.db, "a connection of the store's own");
      insert(db, request);
      return Response.json({ order: runs }, { status: 201 });
    }),
    { scope: "global", store: s.store },
  );
  const first = await handler(post("k1"));
  assert.equal(first.status, 201);
  assert.deepEqual(await first.json(), { order: 1 });
  const retry = await handler(post("k1"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(await retry.json(), { order: 1 });
  assert.equal(runs, 1);
  assert.equal(s.count(), 1);
  const row = s.db.prepare(`SELECT state FROM ${s.store.table}`).get();
  assert.equal(row?.state, "completed");
});

Deno.test("SqliteStore.transactional(): a throw rolls the rows back and frees the key; an uncacheable answer too", async () => {
  await using s = await setup();
  let outcome: "throw" | 400 | 201 = "throw";
  const events: IdempotencyEvent[] = [];
  const handler = idempotency(
    s.store.transactional((request, db) => {
      insert(db, request);
      if (outcome === "throw") throw new Error("boom");
      return new Response(null, { status: outcome });
    }),
    { scope: "global", store: s.store, onEvent: (e) => events.push(e) },
  );
  await assert.rejects(async () => await handler(post("k1")), /boom/);
  assert.equal(s.count(), 0);
  assert.ok(
    events.some((e) => e.type === "released" && e.outcome === "applied"),
  );
  outcome = 400;
  assert.equal((await handler(post("k1"))).status, 400);
  assert.equal(s.count(), 0);
  outcome = 201;
  const done = await handler(post("k1"));
  assert.equal(done.status, 201);
  assert.equal(done.headers.get("idempotent-replayed"), null);
  assert.equal(s.count(), 1);
});

Deno.test("SqliteStore.transactional(): a claim lost before the commit rolls everything back and answers 409", async () => {
  await using s = await setup();
  const started = deferred();
  const go = deferred();
  const events: IdempotencyEvent[] = [];
  const handler = idempotency(async (request) => {
    started.resolve();
    await go.promise;
    const db = await s.store.transaction(request);
    insert(db, request);
    return new Response("mine", { status: 201 });
  }, { scope: "global", store: s.store, onEvent: (e) => events.push(e) });
  const answer = handler(post("k1"));
  await started.promise;
  // Another owner takes the slot over (as after an expired lease).
  s.db.exec(`UPDATE ${s.store.table} SET token = 'another owner'`);
  go.resolve();
  const response = await answer;
  assert.equal(response.status, 409);
  assert.equal(s.count(), 0);
  const row = s.db.prepare(`SELECT state, token FROM ${s.store.table}`).get();
  assert.deepEqual({ ...row }, { state: "in_flight", token: "another owner" });
  assert.ok(events.some((e) => e.type === "completed" && e.outcome === "lost"));
});

Deno.test("SqliteStore.transactional(): a request without a key, or a method not guarded, runs in a plain transaction: committed on return, rolled back on throw", async () => {
  await using s = await setup();
  let fail = false;
  const handler = idempotency(
    s.store.transactional((request, db) => {
      assert.equal(db.isTransaction, true);
      db.prepare("INSERT INTO effects (key) VALUES (?)").run(request.method);
      if (fail) throw new Error("boom");
      return new Response("plain", { status: 201 });
    }),
    { scope: "global", store: s.store },
  );
  const keyless = await handler(post(null));
  assert.equal(keyless.status, 201);
  assert.equal(await keyless.text(), "plain");
  assert.equal(s.count(), 1);
  const get = await handler(new Request("http://api.test/x"));
  assert.equal(get.status, 201);
  assert.equal(s.count(), 2);
  fail = true;
  await assert.rejects(async () => await handler(post(null)), /boom/);
  assert.equal(s.count(), 2, "the throw rolled its row back");
  assert.equal(
    Number(s.db.prepare(`SELECT count(*) AS n FROM ${s.store.table}`).get()!.n),
    0,
    "no record for a keyless request",
  );
  await assert.rejects(s.store.transaction(post("k")), TypeError);
});

Deno.test("SqliteStore.transaction() in a Hono route commits the route's rows with the record", async () => {
  await using s = await setup();
  const app = new Hono();
  app.post(
    "/orders",
    idempotent({ scope: "global", store: s.store }),
    async (c) => {
      const db = await s.store.transaction(c.req.raw);
      assert.equal(await s.store.transaction(c.req.raw), db, "the same one");
      insert(db, c.req.raw);
      return c.json({ ok: true }, 201);
    },
  );
  const send = () =>
    app.request("/orders", {
      method: "POST",
      headers: { "idempotency-key": "h1" },
      body: "{}",
    });
  assert.equal((await send()).status, 201);
  const retry = await send();
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(s.count(), 1);
});

Deno.test("SqliteStore: while a transaction is open, replays and conflicts answer, this process's writes wait for it without blocking, and one that waits past timeoutMs fails", async () => {
  await using s = await setup({ timeoutMs: 300 });
  const { store } = s;
  const done = await store.claim("done", opts("d"));
  if (done.state !== "acquired") throw new Error("unreachable");
  await store.complete("done", done.token, ok);
  await store.claim("busy", opts("b"));

  const inside = deferred();
  const go = deferred();
  const handler = idempotency(
    store.transactional(async (request, db) => {
      insert(db, request);
      inside.resolve();
      await go.promise;
      return new Response("ok", { status: 201 });
    }),
    { scope: "global", store },
  );
  const answer = handler(post("held"));
  await inside.promise;
  // Reads go straight through.
  assert.equal((await store.claim("done", opts("d"))).state, "completed");
  assert.equal((await store.claim("busy", opts("b"))).state, "in_flight");
  assert.equal((await store.peek(slotOf("", "held"))).state, "in_flight");
  // A write waits its turn, the event loop running on meanwhile; one
  // that waits past timeoutMs fails, having written nothing.
  await assert.rejects(store.claim("late", opts("l")), (error: Error) => {
    assert.ok(error instanceof StoreError);
    assert.match(error.message, /No write turn within 300 ms/);
    return true;
  });
  assert.equal((await store.peek("late")).state, "absent");
  let fresh: string | undefined;
  const waiting = store.claim("fresh", opts("f")).then((c) => fresh = c.state);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(fresh, undefined, "the claim waits for the transaction");
  go.resolve();
  assert.equal((await answer).status, 201);
  await waiting;
  assert.equal(fresh, "acquired");
});
