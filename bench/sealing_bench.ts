// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What sealed records cost: a request with a new key and a replay on the
 * MemoryStore, in clear (each group's baseline) and sealed (the
 * `encryption` option, AES-256-GCM).
 *
 *     deno task bench bench/sealing_bench.ts
 *
 * @module
 */

import { idempotency, MemoryStore } from "../mod.ts";
import { handler, payload } from "./_app.ts";

const key = await crypto.subtle.generateKey(
  { name: "AES-GCM", length: 256 },
  false,
  ["encrypt", "decrypt"],
);

function guarded(sealed: boolean) {
  const store = new MemoryStore({
    maxEntries: 10_000_000,
    maxBytes: 4_000_000_000,
  });
  return idempotency(handler, {
    scope: "global",
    store,
    ...(sealed ? { encryption: { keys: [{ id: "k1", key }] } } : {}),
  });
}
const clear = guarded(false);
const sealed = guarded(true);

function request(key: string): Request {
  return new Request("http://localhost/payments", {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: payload,
  });
}

await (await clear(request("replayed"))).arrayBuffer();
await (await sealed(request("replayed"))).arrayBuffer();
let n = 0;

Deno.bench(
  { name: "new key, in clear", group: "new key", baseline: true },
  async () => {
    await (await clear(request(`k${n++}`))).arrayBuffer();
  },
);

Deno.bench({ name: "new key, sealed", group: "new key" }, async () => {
  await (await sealed(request(`k${n++}`))).arrayBuffer();
});

Deno.bench(
  { name: "replay, in clear", group: "replay", baseline: true },
  async () => {
    await (await clear(request("replayed"))).arrayBuffer();
  },
);

Deno.bench({ name: "replay, sealed", group: "replay" }, async () => {
  await (await sealed(request("replayed"))).arrayBuffer();
});
