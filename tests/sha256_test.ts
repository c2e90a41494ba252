// Copyright 2026 the @idempotent/http authors. MIT license.
import assert from "node:assert/strict";
import { Hmac, sha256Hex } from "../src/_sha256.ts";

async function subtleHex(
  parts: (Uint8Array | string)[],
  key?: Uint8Array<ArrayBuffer>,
): Promise<string> {
  const encoder = new TextEncoder();
  const bytes = parts.map((part) =>
    typeof part === "string" ? encoder.encode(part) : part
  );
  const all = new Uint8Array(bytes.reduce((n, b) => n + b.byteLength, 0));
  let at = 0;
  for (const b of bytes) {
    all.set(b, at);
    at += b.byteLength;
  }
  const digest = new Uint8Array(
    key === undefined
      ? await crypto.subtle.digest("SHA-256", all)
      : await crypto.subtle.sign("HMAC", await hmacKey(key), all),
  );
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

function hmacKey(raw: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  const algorithm = { name: "HMAC", hash: "SHA-256" };
  return crypto.subtle.importKey("raw", raw, algorithm, false, ["sign"]);
}

/** Text of `n` characters drawn from ASCII, Latin-1, BMP and astral ones. */
function text(n: number, seed: number): string {
  const pool = ["a", "\n", ":", "é", "€", "\u{1F600}", "\u00ff", "\u007f"];
  let out = "";
  for (let i = 0; i < n; i++) out += pool[(seed * 31 + i * 7) % pool.length];
  return out;
}

Deno.test("sha256Hex() agrees with crypto.subtle on text, bytes and both, around every block edge", async () => {
  const lengths = [0, 1, 54, 55, 56, 57, 63, 64, 65, 119, 120, 128, 300];
  for (const n of lengths) {
    const bytes = crypto.getRandomValues(new Uint8Array(n));
    const ascii = "x".repeat(n);
    const mixed = text(n, n);
    const cases: (Uint8Array | string)[][] = [
      [bytes],
      [ascii],
      [mixed],
      [ascii, bytes],
      [mixed, bytes, ascii],
      ["idempotency-slot\n3:abc\n", mixed, "\n", ascii],
      [`é${ascii}`],
      [`${ascii}é`],
    ];
    for (const parts of cases) {
      const [a, b, c, d] = parts;
      assert.equal(sha256Hex(a!, b, c, d), await subtleHex(parts), `${n}`);
    }
  }
});

Deno.test("sha256Hex() hashes a lone surrogate as U+FFFD, as TextEncoder does", async () => {
  assert.equal(sha256Hex("a\uD800b"), await subtleHex(["a\uFFFDb"]));
});

Deno.test("Hmac agrees with crypto.subtle's HMAC-SHA-256 around every block edge, for keys up to a block and longer", async () => {
  for (const keyLength of [1, 32, 63, 64, 65, 100, 200]) {
    const key = crypto.getRandomValues(new Uint8Array(keyLength));
    const hmac = new Hmac(key);
    for (const n of [0, 1, 31, 32, 55, 56, 64, 65, 119, 120, 300]) {
      const bytes = crypto.getRandomValues(new Uint8Array(n));
      const cases: (Uint8Array | string)[][] = [
        [bytes],
        [text(n, n)],
        ["idempotency-slot\n3:abc\n", text(n, 1), "\n", bytes],
      ];
      for (const parts of cases) {
        const [a, b, c, d] = parts;
        assert.equal(
          hmac.hex(a!, b, c, d),
          await subtleHex(parts, key),
          `${n}`,
        );
      }
    }
    // Its states are its own: a plain hash between two calls changes nothing.
    const once = hmac.hex("x");
    sha256Hex("y".repeat(100));
    assert.equal(hmac.hex("x"), once);
  }
});
