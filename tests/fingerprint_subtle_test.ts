// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The request fingerprint: hashed synchronously under 8 KiB,
 * by `crypto.subtle` from it on, the same digest either way.
 *
 * @module
 */

import assert from "node:assert/strict";
import { pathAndQuery, requestFingerprint } from "../src/fingerprint.ts";

async function reference(method: string, url: string, body: Uint8Array) {
  const head = new TextEncoder().encode(
    `idempotency-request\n${method}\n${pathAndQuery(url)}\n`,
  );
  const all = new Uint8Array(head.byteLength + body.byteLength);
  all.set(head);
  all.set(body, head.byteLength);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("requestFingerprint is synchronous below 8 KiB and a promise from 8 KiB on, one digest either way", async () => {
  const url = "http://api.test/pay?x=1#frag";
  for (const size of [0, 8191, 8192, 8193]) {
    const body = new Uint8Array(size).map((_, i) => i % 251);
    const fingerprint = requestFingerprint("POST", url, body);
    assert.equal(typeof fingerprint === "string", size < 8192, `${size}`);
    assert.equal(await fingerprint, await reference("POST", url, body));
  }
});

Deno.test("requestFingerprint tells method, path, query and body apart, and ignores the fragment", async () => {
  const body = new TextEncoder().encode("{}");
  const base = await requestFingerprint("POST", "http://a.test/p?q=1", body);
  for (
    const [method, url, b] of [
      ["PUT", "http://a.test/p?q=1", body],
      ["POST", "http://a.test/p?q=2", body],
      ["POST", "http://a.test/r?q=1", body],
      ["POST", "http://a.test/p?q=1", new TextEncoder().encode("{ }")],
    ] as const
  ) {
    assert.notEqual(await requestFingerprint(method, url, b), base, url);
  }
  assert.equal(
    await requestFingerprint("POST", "http://b.test/p?q=1#x", body),
    base,
    "the host and fragment are not part of it",
  );
  assert.equal(pathAndQuery("http://a.test"), "/");
});
