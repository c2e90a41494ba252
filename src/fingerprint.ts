// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The slot a key is kept under and the fingerprint of a request: SHA-256, or
 * HMAC-SHA-256 under a `secret` (docs/architecture.md, Scoped hashed slots). @module
 */

import { concatBytes } from "./_bytes.ts";
import { canonicalJson } from "./_jcs.ts";
import { Hmac, sha256Hex } from "./_sha256.ts";

/** Bodies from this size on are hashed by `crypto.subtle` (`bench/middleware_bench.ts`). */
const SUBTLE_FROM_BYTES = 8192;

/**
 * The slot for a key within a scope: 64 hex characters, SHA-256, or
 * HMAC-SHA-256 under the middleware's `secret`. `scope: "global"` keys go to
 * `slotOf("", key)`; a `scope` function must not return `""`.
 *
 * @example Two tenants, one key, two slots
 * ```ts
 * import { slotOf } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * assert.notEqual(slotOf("tenant-a", "1"), slotOf("tenant-b", "1"));
 * assert.notEqual(slotOf("\uD800", "1"), slotOf("\uFFFD", "1"));
 * assert.match(slotOf("", "1"), /^[0-9a-f]{64}$/);
 * const secret = "0123456789abcdef0123456789abcdef";
 * assert.notEqual(slotOf("", "1", { secret }), slotOf("", "1"));
 * ```
 */
export function slotOf(
  scope: string,
  key: string,
  options?: { secret?: string | Uint8Array },
): string {
  return hasherOf(options?.secret).slot(scope, key);
}

/**
 * The default fingerprint: the hex SHA-256 of the method, the path with
 * query, and the body (no headers); with `secret`, their HMAC-SHA-256 under
 * it. Synchronous under 8 KiB, else a promise.
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
  options?: { secret?: string | Uint8Array },
): string | Promise<string> {
  return hasherOf(options?.secret).request(method, url, body);
}

/**
 * The `fingerprint` for JSON APIs: the method, the path with query and the
 * body's JSON value in RFC 8785 (JCS) form, hashed as
 * {@linkcode requestFingerprint} hashes (with `secret`, HMAC-SHA-256 under it;
 * the middleware passes its own). So a retry whose client wrote the body anew
 * replays: key order, spacing, `1.0` for `1`, `1e2` for `100`, `\u0041` for
 * `A` make no difference; any changed value, `null` for an absent member, or
 * another array order does (422). A body that is not JSON (or not UTF-8) is
 * fingerprinted by its bytes, as is one holding a number of magnitude 2⁵³ or
 * more (such numbers collide as doubles: send them as strings); duplicate
 * keys count as `JSON.parse` reads them (the last), a lone surrogate as its
 * `\uXXXX` escape (which RFC 8785 leaves undefined). A canonical body, and one
 * that is not JSON, has {@linkcode requestFingerprint}'s value, so switching
 * to it keeps those records' retries replaying. Pass it as it is:
 * `fingerprint: jsonFingerprint` (the canonicaliser: bench/README.md, JSON
 * fingerprints).
 *
 * @example Reordered keys, one fingerprint
 * ```ts
 * import { idempotency, jsonFingerprint } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const bytes = (text: string) => new TextEncoder().encode(text);
 * const post = new Request("http://api.test/pay", { method: "POST" });
 * assert.equal(
 *   await jsonFingerprint(post, bytes('{"amount":100,"currency":"EUR"}')),
 *   await jsonFingerprint(post, bytes('{ "currency": "EUR", "amount": 1e2 }')),
 * );
 * const handler = idempotency(() => new Response("paid"), {
 *   scope: "global",
 *   fingerprint: jsonFingerprint,
 * });
 * ```
 */
export function jsonFingerprint(
  request: Request,
  body: Uint8Array,
  options?: { secret?: string | Uint8Array },
): string | Promise<string> {
  const method = request.method.toUpperCase();
  return hasherOf(options?.secret).json(method, request.url, body);
}

/** The `secret` option made ready, checked (`TypeError`, `RangeError`). */
export function hasherOf(secret: unknown): Hasher {
  if (secret === undefined) return PLAIN;
  const key = typeof secret === "string"
    ? new TextEncoder().encode(secret)
    : secret instanceof Uint8Array
    ? new Uint8Array(secret)
    : undefined;
  if (key === undefined) {
    throw new TypeError(
      `'secret' must be a string or a Uint8Array: current value is ${
        secret === null ? "null" : `of type ${typeof secret}`
      }`,
    );
  }
  if (key.byteLength < 32) {
    throw new RangeError(
      `'secret' must be at least 32 bytes (as UTF-8) and random: a shorter one can be guessed from a store dump, and then the dump confirms guessed keys and bodies: current length is ${key.byteLength}`,
    );
  }
  return new Hasher(key);
}

/** Slots and fingerprints, hashed plainly or under one secret. */
export class Hasher {
  #hex: typeof sha256Hex;
  #key: Uint8Array<ArrayBuffer> | undefined;
  #imported: Promise<CryptoKey> | undefined;

  constructor(key: Uint8Array<ArrayBuffer> | undefined) {
    this.#key = key;
    const hmac = key && new Hmac(key);
    this.#hex = hmac ? hmac.hex.bind(hmac) : sha256Hex;
  }

  /** See {@linkcode slotOf}. */
  slot(scope: string, key: string): string {
    if (scope.isWellFormed() && key.isWellFormed()) {
      return this.#hex(`idempotency-slot\n${scope.length}:${scope}\n`, key);
    }
    return this.#hex(
      "idempotency-slot-utf16\n",
      codeUnits(scope),
      "\n",
      codeUnits(key),
    );
  }

  /** See {@linkcode requestFingerprint}. */
  request(
    method: string,
    url: string,
    body: Uint8Array<ArrayBuffer>,
  ): string | Promise<string> {
    const head = `idempotency-request\n${method}\n${pathAndQuery(url)}\n`;
    if (body.byteLength < SUBTLE_FROM_BYTES) return this.#hex(head, body);
    const bytes = new TextEncoder().encode(head);
    const all = concatBytes([bytes, body], bytes.byteLength + body.byteLength);
    return this.#subtle(all);
  }

  /** See {@linkcode jsonFingerprint}. */
  json(
    method: string,
    url: string,
    body: Uint8Array,
  ): string | Promise<string> {
    const bytes = canonicalJson(body) ??
      (body.buffer instanceof ArrayBuffer ? body : new Uint8Array(body));
    return this.request(method, url, bytes as Uint8Array<ArrayBuffer>);
  }

  /** A custom `fingerprint`'s value, hashed injectively as a slot is. */
  custom(value: string): string {
    return value.isWellFormed()
      ? this.#hex("idempotency-fingerprint\n", value)
      : this.#hex("idempotency-fingerprint-utf16\n", codeUnits(value));
  }

  async #subtle(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
    if (this.#key === undefined) {
      return toHex(await crypto.subtle.digest("SHA-256", bytes));
    }
    // Imported at first use: workerd refuses `crypto.subtle` at startup.
    const key = await (this.#imported ??= importKey(this.#key));
    return toHex(await crypto.subtle.sign("HMAC", key, bytes));
  }
}

function importKey(key: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  const algorithm = { name: "HMAC", hash: "SHA-256" };
  return crypto.subtle.importKey("raw", key, algorithm, false, ["sign"]);
}

const PLAIN = new Hasher(undefined);

/** Text as its UTF-16 code units, 4 hex digits each: injective, and ASCII. */
function codeUnits(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    out += text.charCodeAt(i).toString(16).padStart(4, "0");
  }
  return out;
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
  const hex = (byte: number) => byte.toString(16).padStart(2, "0");
  return Array.from(new Uint8Array(buffer), hex).join("");
}
