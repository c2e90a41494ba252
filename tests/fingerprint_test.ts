// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `src/fingerprint.ts`: the slot and the fingerprint, plain SHA-256 pinned to
 * today's digests, and HMAC-SHA-256 under a `secret`, checked against
 * `crypto.subtle` and through the middleware. Multi-byte scopes, the 8 KiB
 * switch under a secret and a byte secret copied are in
 * `fingerprint_inputs_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, MemoryStore } from "../mod.ts";
import { requestFingerprint, slotOf } from "../src/fingerprint.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { post } from "./_support/http.ts";
import { counting } from "./_support/idempotency.ts";

const encoder = new TextEncoder();
const SECRET = "a secret of 32 bytes at least...";
const OTHER = crypto.getRandomValues(new Uint8Array(100)); // Over a block.
const SMALL = encoder.encode('{"amount":100}');
const LARGE = new Uint8Array(10_000).map((_, i) => i % 251);
const CLAIM = { fingerprint: "", leaseMs: 1_000, ttlMs: 60_000 };

/** HMAC-SHA-256 by `crypto.subtle`, over the parts' concatenation (text as UTF-8). */
async function subtleHmac(
  secret: string | Uint8Array<ArrayBuffer>,
  ...parts: (string | Uint8Array)[]
): Promise<string> {
  const raw = typeof secret === "string" ? encoder.encode(secret) : secret;
  const key = await crypto.subtle.importKey(
    "raw",
    raw,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const bytes = parts.map((p) => typeof p === "string" ? encoder.encode(p) : p);
  const all = new Uint8Array(bytes.reduce((n, b) => n + b.byteLength, 0));
  bytes.reduce((at, b) => (all.set(b, at), at + b.byteLength), 0);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, all));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The fingerprint `store` holds for `slot`. */
async function storedFingerprint(
  store: IdempotencyStore,
  slot: string,
): Promise<string> {
  const found = await store.claim(slot, CLAIM);
  assert.equal(found.state, "completed");
  return found.state === "completed" ? found.fingerprint : "";
}

Deno.test("without a secret, slots and fingerprints are today's SHA-256 digests", async () => {
  // Computed by the release before `secret`: records written then stay reachable.
  assert.equal(
    slotOf("tenant-a", "order-42"),
    "214e81d903d797436b367798223cca494abcad92ddd854bc671804280ac0f21f",
  );
  assert.equal(
    slotOf("tenant-a", "order-42", {}),
    slotOf("tenant-a", "order-42"),
  );
  assert.equal(
    await requestFingerprint("POST", "http://api.test/pay?x=1#frag", SMALL),
    "7917a47e3900a9a38995fe0d04981dfc5b3c57ac1e1a1103b110cb7d01dda941",
  );
  assert.ok(LARGE.byteLength >= 8192); // By crypto.subtle, from 8 KiB on.
  assert.equal(
    await requestFingerprint("POST", "http://api.test/pay", LARGE),
    "2ea58fb4fd8524e3498c5ea385d1d31c8583c971a89e3b1aa3fced362d981275",
  );
  assert.equal(
    await requestFingerprint("PATCH", "http://api.test", new Uint8Array(0)),
    "c9b92c9ed118af64fdf998ed2d2c07354bc1a16f4b6b07687e3f3ea5745c54b4",
  );
  const store = new MemoryStore();
  for (const [key, value] of [["c", "order 42 for 100 €"], ["d", "a\uD800"]]) {
    const guarded = idempotency(() => new Response("ok"), {
      scope: "global",
      store,
      fingerprint: () => value!,
    });
    await (await guarded(post(key!))).text();
  }
  assert.equal(
    await storedFingerprint(store, slotOf("", "c")),
    "7422f22613128627425cbb3247232e6e66bd4c8febf7af992840b3b729e071bf",
  );
  assert.equal(
    await storedFingerprint(store, slotOf("", "d")),
    "711156f535ecbf419215ef57423d8cf59ad06a5f6b9d52f0bf8eb0b53c4a82bd",
  );
});

Deno.test("with a secret, a slot is the HMAC-SHA-256 of the bytes SHA-256 hashed without", async () => {
  for (const secret of [SECRET, OTHER]) {
    for (
      const [scope, key] of [["tenant-a", "order-42"], ["", "1"], [
        "ü €😀",
        "k",
      ]]
    ) {
      const slot = slotOf(scope!, key!, { secret });
      assert.notEqual(slot, slotOf(scope!, key!));
      assert.equal(
        slot,
        await subtleHmac(
          secret,
          `idempotency-slot\n${scope!.length}:${scope}\n`,
          key!,
        ),
      );
    }
    // Ill-formed text: its UTF-16 code units, as without a secret.
    assert.equal(
      slotOf("\uD800", "k", { secret }),
      await subtleHmac(
        secret,
        "idempotency-slot-utf16\n",
        "d800",
        "\n",
        "006b",
      ),
    );
  }
  assert.notEqual(
    slotOf("", "1", { secret: SECRET }),
    slotOf("", "1", { secret: OTHER }),
  );
});

Deno.test("with a secret, a request's fingerprint is the HMAC-SHA-256 of what SHA-256 hashed without, small and large", async () => {
  for (const secret of [SECRET, OTHER]) {
    for (const body of [SMALL, LARGE, new Uint8Array(0)]) {
      const url = "http://api.test/pay?x=1#frag";
      const keyed = await requestFingerprint("POST", url, body, { secret });
      assert.notEqual(keyed, await requestFingerprint("POST", url, body));
      assert.equal(
        keyed,
        await subtleHmac(secret, "idempotency-request\nPOST\n/pay?x=1\n", body),
        `${body.byteLength} bytes`,
      );
    }
  }
});

Deno.test("with a secret, the middleware keeps HMAC slots and fingerprints, a custom one too", async () => {
  const store = new MemoryStore();
  const options = { scope: () => "tenant-a", store, secret: SECRET };
  const guarded = idempotency(() => new Response("ok"), options);
  await (await guarded(post("k1", LARGE))).text();
  const slot = slotOf("tenant-a", "k1", { secret: SECRET });
  assert.equal(
    await storedFingerprint(store, slot),
    await subtleHmac(SECRET, "idempotency-request\nPOST\n/payments\n", LARGE),
  );
  assert.equal(
    (await store.claim(slotOf("tenant-a", "k1"), CLAIM)).state,
    "acquired",
  );
  const custom = idempotency(() => new Response("ok"), {
    ...options,
    fingerprint: () => "order 42",
  });
  await (await custom(post("k2"))).text();
  assert.equal(
    await storedFingerprint(
      store,
      slotOf("tenant-a", "k2", { secret: SECRET }),
    ),
    await subtleHmac(SECRET, "idempotency-fingerprint\n", "order 42"),
  );
});

Deno.test("with a secret, a retry replays and another body with the key is 422", async () => {
  const { state, handler } = counting((_, n) =>
    new Response(`run ${n}`, { status: 201 })
  );
  const guarded = idempotency(handler, { scope: "global", secret: OTHER });
  for (const body of [SMALL, LARGE]) {
    const key = `retry-${body.byteLength}`;
    const first = await guarded(post(key, body));
    const retry = await guarded(post(key, body));
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(await retry.text(), await first.text());
    const other = await guarded(post(key, encoder.encode('{"amount":999}')));
    await other.body?.cancel();
    assert.equal(other.status, 422);
  }
  assert.equal(state.runs, 2);
});

Deno.test("two middlewares with different secrets on one store never see each other's records", async () => {
  const store = new MemoryStore();
  const a = counting((_, n) => new Response(`a ${n}`, { status: 201 }));
  const b = counting((_, n) => new Response(`b ${n}`, { status: 201 }));
  const guardedA = idempotency(a.handler, {
    scope: "global",
    store,
    secret: SECRET,
  });
  const guardedB = idempotency(b.handler, {
    scope: "global",
    store,
    secret: OTHER,
  });
  assert.equal(await (await guardedA(post("shared"))).text(), "a 1");
  assert.equal(await (await guardedB(post("shared"))).text(), "b 1");
  // Each replays its own; a key and body one of them holds is new to the other.
  assert.equal(await (await guardedA(post("shared"))).text(), "a 1");
  assert.equal(await (await guardedB(post("shared"))).text(), "b 1");
  assert.equal(await (await guardedB(post("b-first", SMALL))).text(), "b 2");
  assert.equal(await (await guardedA(post("b-first", SMALL))).text(), "a 2");
  assert.deepEqual([a.state.runs, b.state.runs], [2, 2]);
});
