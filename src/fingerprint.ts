// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The slot a key is kept under and the fingerprint of a request.
 *
 * @module
 */

import { concatBytes } from "./_bytes.ts";
import { sha256Hex } from "./_sha256.ts";

/** Bodies from this size on are hashed by `crypto.subtle` (`bench/middleware_bench.ts`). */
export const SUBTLE_FROM_BYTES = 8192;

/**
 * The slot for a key within a scope: the hex SHA-256 of both,
 * length-prefixed, injective over all JavaScript strings (a lone surrogate
 * is hashed as UTF-16 code units under another prefix). The raw key is never
 * stored.
 *
 * @param scope The scope (tenant, principal), `""` for one global scope.
 * @param key The parsed idempotency key.
 * @returns 64 hex characters.
 *
 * @example Two tenants, one key, two slots
 * ```ts
 * import { slotOf } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * assert.notEqual(slotOf("tenant-a", "1"), slotOf("tenant-b", "1"));
 * assert.notEqual(slotOf("\uD800", "1"), slotOf("\uFFFD", "1"));
 * assert.match(slotOf("", "1"), /^[0-9a-f]{64}$/);
 * ```
 */
export function slotOf(scope: string, key: string): string {
  if (scope.isWellFormed() && key.isWellFormed()) {
    return sha256Hex(`idempotency-slot\n${scope.length}:${scope}\n`, key);
  }
  return sha256Hex(
    "idempotency-slot-utf16\n",
    codeUnits(scope),
    "\n",
    codeUnits(key),
  );
}

/** Text as its UTF-16 code units, 4 hex digits each: injective, and ASCII. */
export function codeUnits(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    out += text.charCodeAt(i).toString(16).padStart(4, "0");
  }
  return out;
}

/**
 * The default fingerprint: the hex SHA-256 of the method, the path with
 * query, and the body (no headers). Synchronous under 8 KiB, else a promise.
 *
 * @example
 * ```ts
 * import { requestFingerprint } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const body = new TextEncoder().encode('{"amount":100}');
 * const a = await requestFingerprint("POST", "http://api.test/pay?x=1", body);
 * const b = await requestFingerprint("POST", "http://api.test/pay?x=2", body);
 * assert.notEqual(a, b);
 * ```
 */
export function requestFingerprint(
  method: string,
  url: string,
  body: Uint8Array<ArrayBuffer>,
): string | Promise<string> {
  const head = `idempotency-request\n${method}\n${pathAndQuery(url)}\n`;
  if (body.byteLength < SUBTLE_FROM_BYTES) return sha256Hex(head, body);
  const bytes = new TextEncoder().encode(head);
  const all = concatBytes([bytes, body], bytes.byteLength + body.byteLength);
  return crypto.subtle.digest("SHA-256", all).then(toHex);
}

/** The path and query of an absolute URL, without parsing it fully. */
export function pathAndQuery(url: string): string {
  const scheme = url.indexOf("://");
  if (scheme < 0) return url;
  const slash = url.indexOf("/", scheme + 3);
  if (slash < 0) return "/";
  const hash = url.indexOf("#", slash);
  return hash < 0 ? url.slice(slash) : url.slice(slash, hash);
}

function toHex(buffer: ArrayBuffer): string {
  const bytes = new Uint8Array(buffer);
  let out = "";
  for (const byte of bytes) out += byte.toString(16).padStart(2, "0");
  return out;
}
