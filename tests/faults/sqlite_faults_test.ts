// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The fault-injection suite's SqliteStore case: a real SqliteStore under
 * load with duplicates (300 keys, 3 requests each, 16 at a time) while
 * another process holds the file's write lock (`BEGIN EXCLUSIVE`) past the
 * store's busy_timeout, until the store's writes have failed a few times;
 * then the lock goes and the store comes back.
 *
 * Allowed: a 503 problem while the lock is held (a write waits
 * busy_timeout, the event loop stopped, then fails; nothing is written).
 * Everything else is a failure: a second execution of a key, an answer
 * that is not the handler's bytes or a problem, a key still in flight half
 * a lease after the load.
 *
 * @module
 */
import assert from "node:assert/strict";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { Child, support } from "../_support/sqlite_child.ts";
import { waitFor } from "../_support/time.ts";
import {
  assertNoHarm,
  duplicates,
  guardedApp,
  load,
  loadFigures,
  report,
  settle,
  tally,
} from "./_load.ts";

const KEYS = 300;
/**
 * Longer than the lock lasts: each write blocked on it stops the event loop
 * for busy_timeout, so under 16 callers the test's own release of the lock
 * takes seconds to get a turn. A lock longer than a lease lets a retry take
 * over a claim whose renewals failed: a second run, as with any store.
 */
const LEASE = 60_000;

Deno.test("faults: SqliteStore with its file locked by another process past busy_timeout, under load with duplicates", async () => {
  const dir = await Deno.makeTempDir({ prefix: "idem-faults-" });
  const path = `${dir}/db.sqlite`;
  const store = new SqliteStore({ database: path, busyTimeoutMs: 20 });
  try {
    await store.migrate();
    const { ledger, send, storeErrors } = guardedApp(store, LEASE);
    // Started before the load, which can otherwise end before it locks.
    await using locker = new Child(support("sqlite_locker.ts"), [path]);
    assert.equal(await locker.line(), "ready");
    const keys = Array.from({ length: KEYS }, (_, i) => `lock-k${i}`);
    let faults = 0;
    let lockedMs = 0;
    const seen = tally();
    await load(send, ledger, {
      keys,
      duplicates: 3,
      concurrency: 16,
      async progress(done, total) {
        if (faults > 0 || done < total / 3) return;
        faults++;
        const before = storeErrors();
        await locker.send();
        assert.equal(await locker.line(), "locked");
        await waitFor(
          "store errors while the file is locked",
          () => storeErrors() >= before + 5,
          60_000, // a bound, not a wait: each blocked write stops the loop
        );
        await locker.send();
        const released = await locker.line();
        assert.match(released, /^released \d+$/);
        lockedMs = Number(released.split(" ")[1]);
      },
    }, seen);
    assert.equal(faults, 1, "the fault was injected");
    const settled = await settle(send, ledger, keys, LEASE / 2, seen, 16);
    const dup = duplicates(ledger);
    report("sqlite lock", {
      faults,
      lockedMs: Math.round(lockedMs),
      storeErrors: storeErrors(),
      ...loadFigures(seen, ledger, dup, settled),
    });
    assertNoHarm(dup, seen, settled);
    assert.ok(storeErrors() >= 5);
    assert.ok(lockedMs < LEASE, `the lock lasted less than a lease`);
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
});
