// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The hash inputs at their encoding edges (docs/architecture.md, Scoped
 * hashed slots): long scopes and keys of multi-byte characters hashed as
 * their UTF-8 behind a length in UTF-16 code units, plain and under a
 * secret; bodies either side of the 8 KiB switch to `crypto.subtle` under a
 * secret; a secret given as bytes copied when the middleware is made, so
 * the app's buffer changed later moves nothing. The digests' values are in
 * tests/fingerprint_test.ts, the switch without a secret in
 * tests/fingerprint_subtle_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createHash, createHmac } from "node:crypto";
import { Buffer } from "node:buffer";
import fc from "fast-check";
import {
  idempotency,
  MemoryStore,
  requestFingerprint,
  slotOf,
} from "../mod.ts";
import { post } from "./_support/http.ts";

/** Where `requestFingerprint` moves to `crypto.subtle` (src/fingerprint.ts). */
const SUBTLE_FROM_BYTES = 8192;

/** SHA-256, or HMAC-SHA-256 under `secret`, of `bytes`, by node:crypto. */
function reference(bytes: Uint8Array, secret?: Uint8Array): string {
  const hash = secret === undefined
    ? createHash("sha256")
    : createHmac("sha256", Buffer.from(secret));
  return hash.update(bytes).digest("hex");
}

/** The slot's documented input: its prefix, the scope's length in UTF-16 code units. */
function slotInput(scope: string, key: string): Uint8Array {
  return Buffer.from(`idempotency-slot\n${scope.length}:${scope}\n${key}`);
}

/** Characters of every UTF-8 length, either side of each length's edge. */
const CHARS = [
  "a",
  "\u007f",
  "\u0080",
  "é",
  "\u07ff",
  "\u0800",
  "€",
  "\uffff",
  "\u{10000}",
  "\u{1F600}",
  "\u{10FFFF}",
];
const text = (maxLength: number) =>
  fc.array(fc.constantFrom(...CHARS), { maxLength }).map((a) => a.join(""));

const SECRET = new Uint8Array(32).map((_, i) => i * 7 + 1);

Deno.test("slotOf() hashes long scopes and keys of multi-byte characters as their UTF-8, the scope's length in code units, plain and under a secret", () => {
  fc.assert(
    fc.property(text(400), text(300), (scope, key) => {
      const input = slotInput(scope, key);
      assert.equal(slotOf(scope, key), reference(input));
      assert.equal(
        slotOf(scope, key, { secret: SECRET }),
        reference(input, SECRET),
      );
    }),
    { numRuns: 300 },
  );
  // Longer than any scratch buffer the hasher starts with, each width alone.
  for (const c of CHARS) {
    const scope = c.repeat(1000);
    assert.equal(slotOf(scope, c), reference(slotInput(scope, c)), c);
    assert.equal(
      slotOf(`x${scope}`, `${c}x`, { secret: SECRET }),
      reference(slotInput(`x${scope}`, `${c}x`), SECRET),
      c,
    );
  }
  // The same UTF-8 split differently between scope and key: other slots.
  assert.notEqual(slotOf("é", "é"), slotOf("éé", ""));
  assert.notEqual(slotOf("\u{1F600}", ""), slotOf("", "\u{1F600}"));
});

Deno.test("requestFingerprint() under a secret is the HMAC of the same bytes either side of the 8 KiB switch", async () => {
  const url = "http://api.test/pay/€?q=é";
  const head = Buffer.from(`idempotency-request\nPOST\n/pay/€?q=é\n`);
  for (const secret of [SECRET, "s".repeat(32)]) {
    const key = typeof secret === "string" ? Buffer.from(secret) : secret;
    for (
      const size of [
        SUBTLE_FROM_BYTES - 1,
        SUBTLE_FROM_BYTES,
        SUBTLE_FROM_BYTES + 1,
      ]
    ) {
      const body = new Uint8Array(size).map((_, i) => (i * 13) % 256);
      const found = requestFingerprint("POST", url, body, { secret });
      assert.equal(
        typeof found === "string",
        size < SUBTLE_FROM_BYTES,
        `${size}`,
      );
      const expected = reference(Buffer.concat([head, body]), key);
      assert.equal(await found, expected, `${size} bytes`);
      assert.notEqual(await found, await requestFingerprint("POST", url, body));
    }
  }
});

Deno.test("idempotency() copies a secret given as bytes: the app's buffer changed after changes no slot or fingerprint", async () => {
  // The secret is a view into a larger buffer of the app's.
  const backing = new Uint8Array(64).fill(9);
  const secret = backing.subarray(16, 48);
  secret.set(SECRET);
  const store = new MemoryStore();
  let runs = 0;
  const handler = idempotency(() => new Response(`run ${++runs}`), {
    scope: "global",
    store,
    secret,
  });
  backing.fill(0); // the app reuses or wipes its buffer
  const big = new Uint8Array(SUBTLE_FROM_BYTES + 1).fill(1); // by crypto.subtle
  for (const [key, body] of [["small", "{}"], ["big", big]] as const) {
    const first = await handler(post(key, body));
    assert.equal(await first.text(), `run ${runs}`);
    const replay = await handler(post(key, body));
    assert.equal(replay.headers.get("idempotent-replayed"), "true", key);
    await replay.body?.cancel();
    const slot = slotOf("", key, { secret: SECRET });
    const found = await store.peek(slot);
    assert.equal(found.state, "completed", `${key}: kept at the secret's slot`);
    const bytes = typeof body === "string"
      ? new TextEncoder().encode(body)
      : body;
    const fingerprint = await requestFingerprint(
      "POST",
      "http://api.test/payments",
      bytes,
      { secret: SECRET },
    );
    if (found.state === "completed") {
      assert.equal(
        found.fingerprint,
        fingerprint,
        `${key}: under the secret as given`,
      );
    }
  }
  assert.equal(runs, 2);
});
