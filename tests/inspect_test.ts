// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * inspectKey() and forgetKey() (src/inspect.ts): they find the record the
 * middleware stored for a key under a scope and a secret, and forgetting it
 * lets the next request run the handler again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { idempotency } from "../src/idempotency.ts";
import { forgetKey, inspectKey, type KeyLocation } from "../src/inspect.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import type { IdempotencyStore } from "../src/store.ts";

const secret = "an-app-secret-of-32-bytes-or-more!";

/** A guarded handler on `store` that counts its runs; `hold` keeps it running. */
function app(
  store: IdempotencyStore,
  more: { encryption?: { keys: { id: string; key: CryptoKey }[] } } = {},
) {
  const state = {
    runs: 0,
    hold: null as Promise<void> | null,
    running: () => {},
  };
  const handler = idempotency(async () => {
    state.runs++;
    state.running();
    await state.hold;
    return new Response(`run ${state.runs}`, {
      status: 201,
      headers: { "content-type": "text/plain", "x-run": String(state.runs) },
    });
  }, {
    store,
    secret,
    scope: (req) => req.headers.get("x-account")!,
    ...more,
  });
  const post = (key: string) =>
    handler(
      new Request("http://localhost/pay", {
        method: "POST",
        headers: { "idempotency-key": key, "x-account": "acct-9" },
        body: "{}",
      }),
    );
  return { state, post };
}

Deno.test("inspectKey() finds what the middleware stored under a scope and a secret; forgetKey() makes the next request run again", async () => {
  const store = new MemoryStore();
  const { state, post } = app(store);
  assert.equal((await post("k-1")).status, 201);
  const where = { scope: "acct-9", key: '"k-1"', secret }; // the sf-string spelling
  const found = await inspectKey(store, where);
  assert.equal(found.state, "completed", JSON.stringify(found));
  if (found.state === "completed") {
    assert.equal(found.status, 201);
    assert.deepEqual(found.headerNames, ["content-type", "x-run"]);
    assert.equal(found.bodyBytes, 5);
    assert.equal(found.sealed, undefined);
  }
  const elsewhere: KeyLocation[] = [
    { scope: "acct-9", key: "k-1" }, // no secret
    { scope: "global", key: "k-1", secret },
    { global: true, key: "k-1", secret },
    { scope: "acct-1", key: "k-1", secret },
  ];
  for (const other of elsewhere) {
    assert.equal((await inspectKey(store, other)).state, "absent");
  }
  assert.equal((await post("k-1")).headers.get("idempotent-replayed"), "true");
  assert.equal(state.runs, 1);
  assert.deepEqual(await inspectKey(store, { slot: found.slot }), found);
  const forgotten = await forgetKey(store, { ...where, key: "k-1" });
  assert.deepEqual(forgotten, { slot: found.slot, result: "deleted" });
  assert.equal(await (await post("k-1")).text(), "run 2");
  assert.equal(state.runs, 2);
});

Deno.test("forgetKey() of a request in flight: the next one runs, and the first one's completion is lost", async () => {
  const store = new MemoryStore();
  const { state, post } = app(store);
  let finish!: () => void;
  state.hold = new Promise((resolve) => finish = resolve);
  const started = new Promise<void>((resolve) => state.running = resolve);
  const first = post("k-2");
  const where = { scope: "acct-9", key: "k-2", secret };
  await started;
  state.running = () => {};
  const found = await inspectKey(store, where);
  assert.equal(found.state, "in_flight");
  assert.equal((await forgetKey(store, where)).result, "deleted");
  state.hold = null;
  assert.equal(await (await post("k-2")).text(), "run 2");
  finish();
  await (await first).text();
  assert.equal(
    await (await post("k-2")).text(),
    "run 2",
    "the second run's record stands",
  );
  assert.equal(state.runs, 2);
});

Deno.test("inspectKey() says sealed: true for a record sealed by the encryption option", async () => {
  const key = await crypto.subtle.generateKey(
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
  const store = new MemoryStore();
  const { post } = app(store, { encryption: { keys: [{ id: "k1", key }] } });
  assert.equal((await post("k-3")).status, 201);
  const found = await inspectKey(store, {
    scope: "acct-9",
    key: "k-3",
    secret,
  });
  assert.equal(found.state, "completed");
  assert.equal(found.sealed, true);
  if (found.state === "completed") {
    assert.deepEqual(found.headerNames, ["idempotent-sealed"]);
  }
});

Deno.test("inspectKey() and forgetKey() refuse a store without the method, a malformed key and an empty scope", async () => {
  const memory = new MemoryStore();
  const bare: IdempotencyStore = {
    claim: (slot, o) => memory.claim(slot, o),
    complete: (slot, token, r) => memory.complete(slot, token, r),
    release: (slot, token) => memory.release(slot, token),
    extend: (slot, token, ms) => memory.extend(slot, token, ms),
  };
  const where = { scope: "global", key: "k" };
  await assert.rejects(inspectKey(bare, where), {
    name: "TypeError",
    message: /no peek\(\) method/,
  });
  await assert.rejects(forgetKey(bare, where), {
    name: "TypeError",
    message: /no forget\(\) method/,
  });
  await assert.rejects(inspectKey(memory, { scope: "global", key: "a,b" }), {
    name: "TypeError",
    message: /'key' is not a key the middleware accepts: the key has a comma/,
  });
  await assert.rejects(forgetKey(memory, { scope: "", key: "k" }), TypeError);
  await assert.rejects(
    inspectKey(memory, { scope: "global", key: "k", secret: "short" }),
    RangeError,
  );
  await assert.rejects(inspectKey(memory, { slot: "" }), TypeError);
  // A misspelt secret must not look the key up unhashed, as "absent".
  const misspelt = { scope: "global", key: "k", secrte: "x".repeat(32) };
  await assert.rejects(forgetKey(memory, misspelt as typeof where), {
    name: "TypeError",
    message: /has no option 'secrte': did you mean 'secret'\?/,
  });
});

Deno.test('inspectKey(): global: true is the scope: "global" option, scope: "global" the text a scope function returned', async () => {
  const store = new MemoryStore();
  const post = (scope: "global" | (() => string), key: string) =>
    idempotency(() => new Response("ok"), { store, scope })(
      new Request("http://localhost/", {
        method: "POST",
        headers: { "idempotency-key": key },
      }),
    );
  await post("global", "opt-1"); // the option: the empty scope
  await post(() => "global", "text-1"); // a function's answer: the text
  const state = async (where: KeyLocation) =>
    (await inspectKey(store, where)).state;
  assert.equal(await state({ global: true, key: "opt-1" }), "completed");
  assert.equal(await state({ scope: "global", key: "opt-1" }), "absent");
  assert.equal(await state({ scope: "global", key: "text-1" }), "completed");
  assert.equal(await state({ global: true, key: "text-1" }), "absent");
  // forgetKey() agrees: each deletes its own record only.
  assert.equal(
    (await forgetKey(store, { scope: "global", key: "opt-1" })).result,
    "absent",
  );
  assert.equal(
    (await forgetKey(store, { global: true, key: "opt-1" })).result,
    "deleted",
  );
  assert.equal(
    (await forgetKey(store, { scope: "global", key: "text-1" })).result,
    "deleted",
  );
});

Deno.test("inspectKey() refuses global with scope, a global that is not true, and neither", async () => {
  const store = new MemoryStore();
  const both = { global: true, scope: "acct-1", key: "k" } as KeyLocation;
  await assert.rejects(inspectKey(store, both), {
    name: "TypeError",
    message: /give 'scope' .* or 'global: true' .*, not both/,
  });
  const off = { global: false, key: "k" } as unknown as KeyLocation;
  await assert.rejects(forgetKey(store, off), {
    name: "TypeError",
    message:
      /'global' must be true, for the scope: "global" option: current value is false/,
  });
  await assert.rejects(inspectKey(store, { key: "k" }), {
    name: "TypeError",
    message: /'scope' must be the text .* or pass global: true/,
  });
});
