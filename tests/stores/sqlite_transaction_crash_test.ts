// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * SqliteStore's transactional mode with real processes
 * (`tests/_support/sqlite_transaction_app.ts`), as
 * `postgres_transaction_crash_test.ts` is for PostgreSQL: an app process
 * SIGKILLed at chosen points (the write lock held), a zombie SIGSTOPped
 * holding the write lock, and two processes under load, all on one file.
 * The points are gates of the test's control server; nothing sleeps for a
 * duration. What is counted is the user's table: exactly one effect row per
 * key, whatever happened.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { AppProcess } from "../faults/_servers.ts";
import { Control, post, settle } from "../_support/transaction_crash.ts";
import { tempDatabase } from "./_sqlite_fixtures.ts";

const LEASE = 1000;
const APP =
  new URL("../_support/sqlite_transaction_app.ts", import.meta.url).pathname;

async function startApp(
  path: string,
  control: Control,
): Promise<AppProcess & AsyncDisposable> {
  const app = new AppProcess(APP, [path, control.url, String(LEASE)], {}, [
    "--allow-write",
  ]);
  await app.port;
  return Object.assign(app, { [Symbol.asyncDispose]: () => app.kill() });
}

/** A migrated file with the user's `effects` table, and a reader of it. */
async function effectsFile() {
  const temp = await tempDatabase();
  const store = new SqliteStore({ database: temp.path });
  await store.migrate();
  store.close();
  const db = new DatabaseSync(temp.path);
  db.exec("CREATE TABLE effects (key TEXT NOT NULL, pid INTEGER NOT NULL)");
  return {
    path: temp.path,
    pids: (key: string) =>
      db.prepare("SELECT pid FROM effects WHERE key = ?").all(key)
        .map((row) => row.pid as number),
    all: () => db.prepare("SELECT key FROM effects").all(),
    async [Symbol.asyncDispose]() {
      db.close();
      await temp[Symbol.asyncDispose]();
    },
  };
}

Deno.test("SqliteStore.transactional(): an app SIGKILLed inside the handler, before COMMIT or right after it leaves exactly one effect, and the retry replays it when it exists", async () => {
  await using file = await effectsFile();
  await using control = new Control();
  await using survivor = await startApp(file.path, control);
  const b = survivor.child.pid;

  for (const point of ["inserted", "captured", "committed"] as const) {
    const key = `crash-${point}`;
    await using victim = await startApp(file.path, control);
    const a = victim.child.pid;
    if (point !== "committed") control.hold(point, key, a);
    const first = post(await victim.port, key).catch(() => null);
    await control.reachedBy(point, key, a);
    await victim.kill();
    await first;

    const retry = await settle(await survivor.port, key);
    assert.equal(retry.status, 201, point);
    const text = await retry.text();
    const pids = file.pids(key);
    assert.equal(pids.length, 1, `exactly one effect when killed at ${point}`);
    if (point === "committed") {
      assert.equal(pids[0], a);
      assert.equal(retry.headers.get("idempotent-replayed"), "true");
      assert.equal(text, `${key} by ${a}`);
    } else {
      assert.equal(pids[0], b);
      assert.equal(retry.headers.get("idempotent-replayed"), null);
      assert.equal(text, `${key} by ${b}`);
    }
    const again = await post(await survivor.port, key);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(await again.text(), text);
  }
});

Deno.test("SqliteStore.transactional(): a zombie SIGSTOPped holding the write lock stops other processes' writes (503 past busy_timeout, nothing runs), and resumed it commits its one effect, which they then replay", async () => {
  await using file = await effectsFile();
  await using control = new Control();
  await using zombie = await startApp(file.path, control);
  await using other = await startApp(file.path, control);
  const a = zombie.child.pid;
  const key = "zombie";

  const gate = control.hold("inserted", key, a);
  const zombieAnswer = post(await zombie.port, key);
  await control.reachedBy("inserted", key, a);
  zombie.pause();
  // The lease runs out; the other process's takeover then needs the write
  // lock the zombie holds: refused after busy_timeout, the handler not run.
  const refused = await settle(await other.port, key);
  assert.equal(refused.status, 503);
  await refused.body?.cancel();
  const fresh = await post(await other.port, "fresh-key");
  assert.equal(fresh.status, 503, "a new key needs the write lock too");
  await fresh.body?.cancel();
  assert.deepEqual(file.pids(key), []);

  gate.resolve();
  zombie.resume();
  const answer = await zombieAnswer;
  assert.equal(answer.status, 201);
  assert.equal(await answer.text(), `${key} by ${a}`);
  assert.deepEqual(file.pids(key), [a]);
  const replay = await settle(await other.port, key, true);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(await replay.text(), `${key} by ${a}`);
});

Deno.test("SqliteStore.transactional(): two processes, 150 keys sent twice to each, exactly one effect row per key", async () => {
  await using file = await effectsFile();
  await using control = new Control();
  await using one = await startApp(file.path, control);
  await using two = await startApp(file.path, control);
  const ports = [await one.port, await two.port];
  const keys = Array.from({ length: 150 }, (_, i) => `load-${i}`);
  const answers = new Map<string, string[]>();
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < keys.length) {
      const key = keys[next++]!;
      const sends = [...ports, ...ports].map(async (port) => {
        const response = await settle(port, key, true);
        assert.equal(response.status, 201);
        return await response.text();
      });
      answers.set(key, await Promise.all(sends));
    }
  }));
  const rows = file.all().map((row) => row.key as string);
  assert.equal(rows.length, keys.length);
  assert.equal(new Set(rows).size, keys.length);
  for (const [key, texts] of answers) {
    assert.equal(new Set(texts).size, 1, `one answer for ${key}`);
  }
});
