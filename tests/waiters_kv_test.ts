// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `waitForInFlight` on KvStore: a duplicate in another middleware instance
 * (its own `Deno.Kv` handle on the same database file) waits through the
 * store's `waitForChange()` (Deno KV's `watch()`) and gets the first response.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../src/stores/kv.ts";
import { assertWaiterWoken } from "./_support/stores.ts";

Deno.test("idempotency() with waitForInFlight on KvStore wakes a duplicate of another instance through waitForChange()", async () => {
  const path = await Deno.makeTempFile({ suffix: ".db" });
  const kvA = await Deno.openKv(path);
  const kvB = await Deno.openKv(path);
  try {
    const log = await assertWaiterWoken(
      new KvStore({ kv: kvA }),
      new KvStore({ kv: kvB }),
      "the watch",
    );
    assert.ok(log.types().includes("woken"));
  } finally {
    kvA.close();
    kvB.close();
    await Deno.remove(path);
  }
});
