// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `waitForInFlight` on KvStore: a duplicate in another middleware instance
 * (its own `Deno.Kv` handle on the same database file) waits through the
 * store's `waitForChange()` (Deno KV's `watch()`) and gets the first response.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency } from "../mod.ts";
import { KvStore } from "../src/stores/kv.ts";
import { deferred, post, recorder, waitFor } from "./_helpers.ts";

Deno.test("idempotency() with waitForInFlight on KvStore wakes a duplicate of another instance through waitForChange()", async () => {
  const path = await Deno.makeTempFile({ suffix: ".db" });
  const kvA = await Deno.openKv(path);
  const kvB = await Deno.openKv(path);
  try {
    const gate = deferred<Response>();
    let runs = 0;
    const handler = async (req: Request) => {
      await req.arrayBuffer();
      runs++;
      return await gate.promise;
    };
    const owner = idempotency(handler, { store: new KvStore({ kv: kvA }) });
    const storeB = new KvStore({ kv: kvB });
    let watches = 0;
    const watch = storeB.waitForChange.bind(storeB);
    storeB.waitForChange = (slot, signal) => {
      watches++;
      return watch(slot, signal);
    };
    const log = recorder();
    const other = idempotency(handler, {
      store: storeB,
      waitForInFlight: 60_000,
      onEvent: log.onEvent,
    });
    const first = owner(post("k"));
    await waitFor("the first run", () => runs === 1);
    const waiting = other(post("k"));
    await waitFor("the watch", () => watches >= 1);
    gate.resolve(new Response("paid", { status: 201 }));
    assert.equal(await (await first).text(), "paid");
    const res = await waiting;
    assert.equal(res.headers.get("idempotent-replayed"), "true");
    assert.equal(await res.text(), "paid");
    assert.equal(runs, 1);
    assert.ok(log.types().includes("woken"));
  } finally {
    kvA.close();
    kvB.close();
    await Deno.remove(path);
  }
});
