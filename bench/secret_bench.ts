// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What `secret` costs: the middleware on the MemoryStore with a fresh key and
 * with a replay, each without a secret (the baseline) and with one; and the
 * two hashes alone (slot, and the fingerprint of the bench's body or of
 * 64 KiB, which `crypto.subtle` hashes).
 *
 *     deno bench -A bench/secret_bench.ts
 *
 * @module
 */

import { idempotency, MemoryStore } from "../mod.ts";
import { hasherOf, slotOf } from "../src/fingerprint.ts";
import { handler, payload } from "./_app.ts";

const SECRET =
  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/** A store of its own for each middleware: one filling does not slow the other. */
const store = () => new MemoryStore({ maxEntries: 10_000_000, maxBytes: 4e9 });
const plain = idempotency(handler, { scope: "global", store: store() });
const keyed = idempotency(handler, {
  scope: "global",
  store: store(),
  secret: SECRET,
});

function request(key: string): Request {
  return new Request("http://localhost/payments", {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: payload,
  });
}

await (await plain(request("replayed"))).arrayBuffer();
await (await keyed(request("replayed"))).arrayBuffer();
let n = 0;

for (const [name, guarded] of [["", plain], [", secret", keyed]] as const) {
  const baseline = name === "";
  Deno.bench(
    { name: `fresh key${name}`, group: "fresh key", baseline },
    async () => {
      await (await guarded(request(`k${n++}`))).arrayBuffer();
    },
  );
  Deno.bench({ name: `replay${name}`, group: "replay", baseline }, async () => {
    await (await guarded(request("replayed"))).arrayBuffer();
  });
}

const body = new TextEncoder().encode(payload);
const large = new Uint8Array(65_536);
const hashers = [["", hasherOf(undefined)], [
  ", secret",
  hasherOf(SECRET),
]] as const;
for (const [name, hasher] of hashers) {
  const baseline = name === "";
  Deno.bench(
    { name: `slot and fingerprint${name}`, group: "hashes", baseline },
    () => {
      hasher.slot("tenant-a", `k${n++}`);
      hasher.request("POST", "http://localhost/payments", body);
    },
  );
  Deno.bench(
    { name: `64 KiB fingerprint${name}`, group: "64 KiB", baseline },
    async () => {
      await hasher.request("POST", "http://localhost/payments", large);
    },
  );
}

// The public helpers set the secret up at each call.
Deno.bench(
  { name: "slotOf(…, { secret }), set up per call", group: "hashes" },
  () => {
    slotOf("tenant-a", `k${n++}`, { secret: SECRET });
  },
);
