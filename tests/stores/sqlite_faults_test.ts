// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * SqliteStore with other processes and a file that refuses: two `deno run`
 * processes on one file are one store; a file another process holds
 * locked (`BEGIN EXCLUSIVE`) fails new writes with a StoreError (503) after
 * `busy_timeout` and leaves nothing behind, while replays still answer; a
 * read-only connection and a full database (`PRAGMA max_page_count`, which
 * is SQLite's own SQLITE_FULL, no root needed) do the same, and the store
 * comes back when the fault ends.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { idempotency } from "../../src/idempotency.ts";
import { StoreError } from "../../src/store.ts";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { post } from "../_support/http.ts";
import { Child, support } from "../_support/sqlite_child.ts";
import { ok, opts, sqliteStore, tempDatabase } from "./_sqlite_fixtures.ts";

Deno.test("SqliteStore: two deno processes on one file are one store: claiming the same 300 keys together, exactly one acquires each", async () => {
  await using temp = await tempDatabase();
  const KEYS = 300;
  await using a = new Child(support("sqlite_claimer.ts"), [
    temp.path,
    `${KEYS}`,
  ]);
  await using b = new Child(support("sqlite_claimer.ts"), [
    temp.path,
    `${KEYS}`,
  ]);
  assert.equal(await a.line(), "ready");
  assert.equal(await b.line(), "ready");
  await Promise.all([a.send(), b.send()]);
  const [ofA, ofB] = (await Promise.all([a.line(), b.line()])).map((line) =>
    JSON.parse(line) as string[]
  ) as [string[], string[]];
  const both = ofA.filter((key) => ofB.includes(key));
  assert.deepEqual(both, [], "no key acquired by both");
  assert.equal(ofA.length + ofB.length, KEYS, "every key acquired by one");
  // Both took part: the claims interleaved rather than ran one after the other.
  assert.ok(ofA.length > 0 && ofB.length > 0, `${ofA.length} / ${ofB.length}`);
});

Deno.test("SqliteStore: a file another process holds locked fails a new key with a StoreError (503) after busy_timeout, leaves nothing behind, replays still answer, and the store comes back", async () => {
  await using temp = await tempDatabase();
  const store = new SqliteStore({ database: temp.path, busyTimeoutMs: 200 });
  await store.migrate();
  try {
    let runs = 0;
    const handler = idempotency(() => {
      runs++;
      return new Response(`run ${runs}`, { status: 201 });
    }, { scope: "global", store });
    assert.equal((await handler(post("before"))).status, 201);

    await using locker = new Child(support("sqlite_locker.ts"), [temp.path]);
    assert.equal(await locker.line(), "ready");
    await locker.send();
    assert.equal(await locker.line(), "locked");
    const started = performance.now();
    await assert.rejects(store.claim("k", opts("f")), (error: Error) => {
      assert.ok(error instanceof StoreError);
      assert.equal(error.operation, "claim");
      assert.match(error.message, /^SQLite claim failed: database is locked$/);
      return true;
    });
    const waited = performance.now() - started;
    assert.ok(waited >= 190, `waited busy_timeout: ${waited} ms`);
    const refused = await handler(post("during"));
    assert.equal(refused.status, 503);
    await refused.body?.cancel();
    assert.equal(runs, 1, "the handler did not run");
    const replay = await handler(post("before"));
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(await replay.text(), "run 1");

    await locker.send();
    assert.match(await locker.line(), /^released \d+$/);
    const rows = new DatabaseSync(temp.path, { readOnly: true });
    const slots = rows.prepare(`SELECT slot FROM ${store.table}`).all();
    rows.close();
    assert.equal(slots.length, 1, "nothing of the refused claims was left");
    const after = await handler(post("during"));
    assert.equal(after.status, 201);
    assert.equal(await after.text(), "run 2");
  } finally {
    store.close();
  }
});

Deno.test("SqliteStore on a read-only connection (readOnly, or PRAGMA query_only) replays and refuses writes with a StoreError; migrate() passes on a migrated file and says why on another", async () => {
  await using s = await sqliteStore();
  const claim = await s.store.claim("done", opts("f"));
  if (claim.state !== "acquired") throw new Error("unreachable");
  await s.store.complete("done", claim.token, ok);
  const readOnly = new DatabaseSync(s.path, { readOnly: true });
  const queryOnly = new DatabaseSync(s.path);
  queryOnly.exec("PRAGMA query_only = 1");
  try {
    for (const database of [readOnly, queryOnly]) {
      const store = new SqliteStore({ database });
      const replay = await store.claim("done", opts("f"));
      assert.equal(replay.state, "completed");
      await assert.rejects(store.claim("new", opts("f")), (error: Error) => {
        assert.ok(error instanceof StoreError);
        assert.match(error.message, /attempt to write a readonly database/);
        return true;
      });
      assert.equal(
        await store.forget("done").catch((e) => e.name),
        "StoreError",
      );
      await store.migrate(); // the table is there: nothing to write
      assert.equal((await store.peek("new")).state, "absent");
    }
  } finally {
    readOnly.close();
    queryOnly.close();
  }
  await using temp = await tempDatabase();
  new DatabaseSync(temp.path).close();
  const empty = new DatabaseSync(temp.path, { readOnly: true });
  await assert.rejects(
    new SqliteStore({ database: empty }).migrate(),
    /readonly database/,
  );
  empty.close();
});

Deno.test("SqliteStore on a full database (max_page_count) fails the write that does not fit with a StoreError, keeps the claim as it was, and completes once there is room", async () => {
  await using s = await sqliteStore();
  const claim = await s.store.claim("big", opts("f"));
  if (claim.state !== "acquired") throw new Error("unreachable");
  const pages = Number(s.db.prepare("PRAGMA page_count").get()!.page_count);
  s.db.exec(`PRAGMA max_page_count = ${pages + 2}`);
  const big = { ...ok, body: new Uint8Array(1 << 20).fill(7) };
  await assert.rejects(
    s.store.complete("big", claim.token, big),
    (error: Error) => {
      assert.ok(error instanceof StoreError);
      assert.equal(error.operation, "complete");
      assert.match(error.message, /database or disk is full/);
      return true;
    },
  );
  const peek = await s.store.peek("big");
  assert.equal(peek.state, "in_flight", "nothing half-written");
  s.db.exec("PRAGMA max_page_count = 1073741823");
  assert.equal(await s.store.complete("big", claim.token, big), "applied");
  const replay = await s.store.claim("big", opts("f"));
  assert.equal(replay.state, "completed");
  if (replay.state === "completed") {
    assert.equal(replay.response.body?.byteLength, 1 << 20);
  }
});
